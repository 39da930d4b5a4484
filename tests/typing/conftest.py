"""The typing tests' one way to run mypy on a user's script against this checkout's ``src``."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture
def mypy_on(tmp_path: Path) -> Callable[[str], str]:
    """``mypy_on(script_text)`` -> mypy's stdout for that script, seen the way a user's project sees tubemq."""

    def run(text: str) -> str:
        import mypy  # noqa: F401 - a test dependency (pyproject's "test" extra): missing = failure, not a skip

        script = tmp_path / "user.py"
        script.write_text(text)
        env = dict(os.environ, MYPYPATH=str(SRC))
        proc = subprocess.run(
            [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache"), "--follow-imports=silent",
             "--ignore-missing-imports", "--no-error-summary", "--hide-error-context", str(script)],
            capture_output=True, text=True, env=env, timeout=300, check=False,
        )
        return proc.stdout

    return run
