"""Server processes for the cluster tests: on 127.0.0.1, on free ports (tubemq.cli.common.start_on_free_ports),
always killed."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

SRC = Path(__file__).resolve().parents[2] / "src"
START_TIMEOUT_S = 30.0


def env(runtime_dir: Path | None = None) -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(SRC) + os.pathsep + e.get("PYTHONPATH", "")
    if runtime_dir is not None:
        e["TUBEMQ_RUNTIME_DIR"] = str(runtime_dir)
    return e


def wait_port(port: int, proc: subprocess.Popen[Any], timeout: float = START_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server process exited with {proc.returncode} before listening on {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


def stop(proc: subprocess.Popen[Any], sig: int = signal.SIGTERM) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(15)


def admin_call(admin_url: str, method: str, **params: Any) -> dict[str, Any]:
    query = "&".join(f"{k}={v}" for k, v in {"type": "op_query", "method": method, **params}.items())
    with urllib.request.urlopen(f"{admin_url}?{query}", timeout=10) as r:
        data: dict[str, Any] = json.loads(r.read())
    return data


def free_ports(n: int) -> list[int]:
    """``n`` distinct ports free on 127.0.0.1 now (for servers whose ports a test must know in advance)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()
