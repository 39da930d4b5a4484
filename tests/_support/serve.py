"""``python -m tubemq serve`` in a child process that a test can SIGKILL and start again on the same ports
and data directory (the reliability scenarios, bench/soak.py, the producer's restart test)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tubemq.cli.admin import AdminClient
from tubemq.cli.common import _wait_listening, start_on_free_ports

from .platform import kill_signal


class ServerProcess:
    """``python -m tubemq serve`` on free ports, restartable on the same ports and data after a SIGKILL."""

    def __init__(self, data_dir: Path, *, balance_period_ms: int = 200) -> None:
        self.data_dir = data_dir
        self.ports: dict[str, int] = {}  # master, broker, admin: picked at the first start
        self.balance_period_ms = balance_period_ms
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def master(self) -> str:
        return f"127.0.0.1:{self.ports['master']}"

    @property
    def broker(self) -> str:
        return f"127.0.0.1:{self.ports['broker']}"

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['admin']}/webapi.htm"

    def _spawn(self, ports: list[int]) -> subprocess.Popen[bytes]:
        cmd = [sys.executable, "-m", "tubemq", "serve", "--data-dir", str(self.data_dir),
               "--master-port", str(ports[0]), "--broker-port", str(ports[1]),
               "--admin-port", str(ports[2]), "--balance-period-ms", str(self.balance_period_ms)]
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.data_dir / "server.log", "ab")  # noqa: SIM115 - the child owns it
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        log.close()
        return self.proc

    def start(self, timeout: float = 60.0) -> ServerProcess:
        """The first start on free ports (new ones when one was taken before the server bound it),
        a restart on the same ones."""
        if self.ports:
            ports = [self.ports["master"], self.ports["broker"], self.ports["admin"]]
            listening = _wait_listening(self._spawn(ports), ports, timeout)
        else:
            proc, ports = start_on_free_ports(self._spawn, 3, timeout)
            listening = proc.poll() is None
            self.ports = dict(zip(("master", "broker", "admin"), ports, strict=True))
        if not listening:
            raise RuntimeError(f"server exited at start: see {self.data_dir / 'server.log'}")
        return self

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(kill_signal())
            self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()

    def create_topic(self, name: str, partitions: int) -> None:
        AdminClient(self.admin_url, timeout=30.0).create_topic(name, partitions=partitions)
