"""A server in a child process on ephemeral ports (0), its master and broker addresses read from its log.

The tests that SIGKILL a real server process start it through :class:`ServerChild`; its stderr (INFO
log) is pumped into a queue by a thread, so the start waits on lines, not on sleeps.
"""

from __future__ import annotations

import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from _support import kill_signal

MASTER_RE = re.compile(r"master listening on ([\d.]+:\d+)")
BROKER_RE = re.compile(r"broker \d+ listening on ([\d.]+:\d+)")


class ServerChild:
    """``python -m tubemq.server`` (or the script ``wrapper`` that takes the same arguments after its own)
    on ports 0, with ``extra`` arguments; ready once its log named the master and broker addresses."""

    def __init__(self, data_dir: Path, *extra: str, wrapper: Sequence[str] = (), start_s: float = 60.0) -> None:
        args = ["--data-dir", str(data_dir), "--master-port", "0", "--broker-port", "0", "--admin-port", "0",
                "--log-level", "INFO", *extra]
        cmd = [sys.executable, *wrapper, *args] if wrapper else [sys.executable, "-m", "tubemq.server", *args]
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        self.lines: queue.Queue[str] = queue.Queue()
        self.log: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()
        self.master = self.broker = ""
        deadline = time.monotonic() + start_s
        while not (self.master and self.broker) and time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.5)
            except queue.Empty:
                if self.proc.poll() is not None:
                    break
                continue
            self.log.append(line)
            if m := MASTER_RE.search(line):
                self.master = m.group(1)
            if m := BROKER_RE.search(line):
                self.broker = m.group(1)
        if not (self.master and self.broker):
            self.kill()
            raise AssertionError("server did not start:\n" + "".join(self.log))

    def _pump(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.put(line)

    def kill(self) -> None:
        """SIGKILL (no shutdown code runs; the tests using this are marked POSIX-only), then reap."""
        if self.proc.poll() is None:
            self.proc.send_signal(kill_signal())
        self.proc.wait(10)

    def terminate(self) -> int:
        """SIGTERM (a clean shutdown); its exit code."""
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(15)
