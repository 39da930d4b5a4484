"""The runnable examples of docs/guide/serializers.md and docs/guide/otel.md run in a fresh
interpreter and print what the pages say they print (the ``# ...`` comment after a print)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = ["serializers.md", "otel.md"]
BLOCKS = [(page, i, block) for page in PAGES
          for i, block in enumerate(re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "guide" / page).read_text(),
                                               flags=re.S))]


def test_the_guides_have_examples() -> None:
    assert {page for page, _, _ in BLOCKS} == set(PAGES)


@pytest.mark.parametrize(("page", "index", "block"), BLOCKS, ids=[f"{p}-{i}" for p, i, _ in BLOCKS])
def test_guide_example_runs(page: str, index: int, block: str, tmp_path: Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(block)
    env = dict(os.environ, TMPDIR=str(tmp_path),
               PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-W", "error::DeprecationWarning", str(script)], capture_output=True,
                       text=True, timeout=120, env=env, cwd=tmp_path)
    print(r.stdout)
    assert r.returncode == 0, r.stderr[-3000:]
    for line in block.splitlines():
        m = re.search(r"print\(.*\)\s+# (.+)$", line)
        if m:
            for part in m.group(1).split(" then "):
                assert part.strip() in r.stdout, (part, r.stdout)
