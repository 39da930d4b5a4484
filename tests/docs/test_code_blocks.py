"""Every python and bash block of README.md and docs/ runs as printed against a fresh `tubemq serve`
(with the quick start's topic ``orders``), in page order; a block that cannot run says why with a
``<!-- norun: REASON -->`` marker, and the markers are counted (tests/docs/blocks.py)."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .blocks import Block, all_blocks, blocks, pages
from .conftest import Served, run_in_own_session

#: The pages run in order against one server in one worker: later pages read what earlier ones sent.
pytestmark = pytest.mark.xdist_group("docs-code-blocks")

#: At most this many blocks may be left unrun (each with its reason); raise it only with a reason.
MAX_NORUN = 28


def _pages_with_runnable_blocks() -> list[Path]:
    return [p for p in pages() if any(_standalone(b) for b in blocks(p))]


def _standalone(b: Block) -> bool:
    """Run here: not skipped, not a test file, not part of a shell session (test_shell_recipes.py)."""
    return not b.norun and not b.fresh and not b.session and not b.pytest


def test_markers_are_counted_and_explained() -> None:
    found = all_blocks()
    skipped = [b for b in found if b.norun is not None]
    for b in skipped:
        print(f"not run: {b.name} ({b.lang}): {b.norun}")
    assert all(b.norun for b in skipped), [b.name for b in skipped if not b.norun]
    assert len(skipped) <= MAX_NORUN, [b.name for b in skipped]
    run = [b for b in found if b.norun is None]
    print(f"{len(run)} blocks run, {len(skipped)} not run")
    assert len(run) >= 15
    # a python block never names a placeholder address a reader cannot reach
    assert not [b.name for b in run if re.search(r"10\.0\.0\.\d", b.code)]


def _run(block: Block, served: Served, cwd: Path, timeout: float = 180) -> str:
    """Run one block; returns a problem description, or '' when it did what it promises."""
    if block.lang == "bash" and sys.platform == "win32":
        return ""  # POSIX shell; the python blocks still run
    code = served.adapt(block.code)
    argv = [sys.executable, "-c", code] if block.lang == "python" else ["bash", "-euo", "pipefail", "-c", code]
    t0 = time.monotonic()
    r = run_in_own_session(argv, timeout=timeout, cwd=cwd, env=served.env)
    print(f"{block.name}: exit {r.returncode} in {time.monotonic() - t0:.1f} s")
    if r.returncode != 0:
        return f"{block.name} failed ({r.returncode}):\n{r.stdout[-800:]}\n{r.stderr[-1500:]}"
    patterns = [p.replace("8123", "[0-9]+") if served.master != "127.0.0.1:8715" else p for p in block.expect]
    missing = [p for p in patterns if not re.search(p, r.stdout)]
    if missing:
        return f"{block.name}: output lacks {missing}; stdout:\n{r.stdout[-800:]}"
    return ""


@pytest.mark.parametrize("page", _pages_with_runnable_blocks(), ids=lambda p: p.name)
def test_page_blocks_run_as_printed(page: Path, served: Served, tmp_path: Path) -> None:
    """The page's blocks one after the other in one directory, as a reader runs them."""
    problems = [p for b in blocks(page) if _standalone(b) if (p := _run(b, served, tmp_path))]
    assert not problems, "\n\n".join(problems)


def test_pytest_blocks_pass(tmp_path: Path, served: Served) -> None:
    found = [b for b in all_blocks() if b.pytest and not b.norun]
    assert found, "the testing guide shows a pytest file"
    for i, b in enumerate(found):
        (tmp_path / f"test_doc_{i}.py").write_text(b.code, encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path, env=served.env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert re.search(r"\b\d+ passed", r.stdout)
