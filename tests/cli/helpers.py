"""Run the ``tubemq`` command as a real subprocess (with a timeout, always)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

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


def dead_port() -> int:
    """A localhost port with (almost certainly) nothing listening."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_for(cond: Callable[[], Any], timeout: float, interval: float = 0.05, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def interrupt(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGINT)
