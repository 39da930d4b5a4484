"""Run the ``tubemq`` command as a real subprocess (with a timeout, always)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from _support import wait_for  # noqa: F401 - re-exported: the CLI tests import it from here

REPO = Path(__file__).resolve().parents[2]


def cli_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("TUBEMQ_MASTER", None)
    env.pop("TUBEMQ_ADMIN_TOKEN", None)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def run_cli(
    args: Sequence[str], *, timeout: float = 60, input: bytes | None = None, env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """``python -m tubemq ARGS``; raises on timeout so a hang is a failure, not a stuck run."""
    return subprocess.run(
        [sys.executable, "-m", "tubemq", *args],
        input=input,
        capture_output=True,
        timeout=timeout,
        env=env or cli_env(),
        cwd=cwd,
    )


#: Windows has no SIGINT/SIGTERM/SIGKILL for a child process: ``send_signal(SIGINT)`` raises, CTRL_C_EVENT
#: reaches every process on the console (pytest too) and ``terminate()``/``kill()`` are TerminateProcess,
#: which no handler sees. Tests of the signal paths run on POSIX only and say so when skipped.
POSIX_SIGNALS = sys.platform != "win32"
needs_posix_signals = pytest.mark.skipif(
    not POSIX_SIGNALS, reason="POSIX signals (SIGINT/SIGTERM/SIGKILL to a child process) are not supported on Windows"
)


def interrupt(proc: subprocess.Popen[bytes]) -> None:
    """Ctrl-C for a child process (SIGINT); only in tests marked ``needs_posix_signals``."""
    if not POSIX_SIGNALS:
        raise RuntimeError("interrupt() needs POSIX signals: mark the test with needs_posix_signals")
    proc.send_signal(signal.SIGINT)
