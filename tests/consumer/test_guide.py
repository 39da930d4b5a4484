"""The runnable examples of docs/guide/consumer-offsets.md run, each in a fresh interpreter (they start
their own embedded server), and print what the page says they print."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "guide" / "consumer-offsets.md"
BLOCKS = re.findall(r"```python\n(.*?)```", GUIDE.read_text(), flags=re.S)


def test_the_guide_has_its_examples() -> None:
    assert len(BLOCKS) == 3
    assert sum(len(re.findall(r"print\(.*\)\s+# [{f]", b)) for b in BLOCKS) == 3  # outputs checked below


@pytest.mark.parametrize("index", range(len(BLOCKS)), ids=["seek", "pause", "hooks"][: len(BLOCKS)])
def test_guide_example_runs(index: int, tmp_path: Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(BLOCKS[index])
    env = dict(os.environ, TMPDIR=str(tmp_path),
               PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env,
                       cwd=tmp_path)
    print(r.stdout)
    assert r.returncode == 0, r.stderr[-3000:]
    for line in BLOCKS[index].splitlines():
        m = re.search(r"print\(.*\)\s+# ((?:frozenset\()?\{.*?\}\)?)", line)
        if m:
            assert m.group(1) in r.stdout, (m.group(1), r.stdout)
