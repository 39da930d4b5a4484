"""A producer across a real server restart (issue 22 item 9): the server process (master + broker) is
SIGKILLed and started again on the same ports and data directory while messages are queued.

What must hold: messages sent while the server is down are not failed at once with a fast
TubeMQConnectionError; they wait for the broker, within their send timeout, and are acknowledged
once it is back (pipelined ``send_async`` and blocking ``send`` from another thread alike); every
acknowledged message is read back after the restart. The outage and recovery times are printed.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from _support import kill_signal, needs_sigkill

import tubemq
from tubemq.cli.admin import AdminClient
from tubemq.cli.common import _wait_listening, start_on_free_ports
from tubemq.errors import TubeMQError

#: how long a server start may take on a loaded machine (s)
START_TIMEOUT = 60.0


class ServerProcess:
    """``python -m tubemq.server`` in a child process on free ports, restartable on the same ports and
    data directory after a SIGKILL (the first start picks new ports if one was taken meanwhile)."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.ports: list[int] = []  # master, broker, admin
        self.proc: subprocess.Popen[bytes] | None = None

    def _spawn(self, ports: list[int]) -> subprocess.Popen[bytes]:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tubemq.server", "--data-dir", str(self.data_dir), "--master-port", str(ports[0]),
             "--broker-port", str(ports[1]), "--admin-port", str(ports[2]), "--log-level", "WARNING"],
            stdin=subprocess.DEVNULL,
        )
        return self.proc

    def start(self) -> None:
        if self.ports:
            assert _wait_listening(self._spawn(self.ports), self.ports, START_TIMEOUT), "server exited at restart"
            return
        proc, self.ports = start_on_free_ports(self._spawn, 3, START_TIMEOUT)
        assert proc.poll() is None, f"server exited with {proc.returncode} at start"

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

    @property
    def master(self) -> str:
        return f"127.0.0.1:{self.ports[0]}"

    @property
    def broker(self) -> str:
        return f"127.0.0.1:{self.ports[1]}"

    def create_topic(self, topic: str) -> None:
        AdminClient(f"http://127.0.0.1:{self.ports[2]}/webapi.htm", timeout=30.0).create_topic(topic, partitions=1)


@needs_sigkill
def test_sends_queued_during_a_server_restart_wait_for_the_broker(tmp_path: Path, stored: Any) -> None:
    server = ServerProcess(tmp_path / "data")
    server.start()
    acked: dict[bytes, Any] = {}
    failed: list[tuple[bytes, BaseException]] = []
    lock = threading.Lock()

    def on_done(data: bytes) -> Any:
        def cb(result: Any, exc: BaseException | None) -> None:
            with lock:
                if exc is None:
                    acked[data] = result
                else:
                    failed.append((data, exc))
        return cb

    try:
        server.create_topic("restart")
        with tubemq.Producer(server.master, rpc_timeout_ms=30000, heartbeat_period_ms=500,
                             register_retry_wait_ms=100) as p:
            p.publish("restart")
            for i in range(200):
                body = b"before %d" % i
                acked[body] = p.send("restart", body)
            assert p.flush(30) == 0
            t_kill = time.monotonic()
            server.kill()
            restarter = threading.Timer(1.5, server.start)
            restarter.start()
            # queued while the server is down: pipelined from this thread, blocking from another
            futures = [p.send_async("restart", b"async %d" % i, callback=on_done(b"async %d" % i))
                       for i in range(2000)]
            blocking: list[Any] = []

            def blocking_sender() -> None:
                for i in range(20):
                    body = b"blocking %d" % i
                    try:
                        r = p.send("restart", body)
                        with lock:
                            acked[body] = r
                    except TubeMQError as exc:
                        with lock:
                            failed.append((body, exc))
                blocking.append(True)

            t = threading.Thread(target=blocking_sender, daemon=True)
            t.start()
            for f in futures:
                f.exception(timeout=120)
            t.join(120)
            restarter.join(60)
            t_done = time.monotonic()
            assert blocking, "the blocking sender hung"
        print(f"server down at 0.00 s, restart started at 1.50 s, every queued send done at "
              f"{t_done - t_kill:.2f} s; acknowledged {len(acked)}, failed {len(failed)}")
        kinds = sorted({type(e).__name__ for _, e in failed})
        assert not failed, f"{len(failed)} sends failed during the restart ({kinds}): {failed[:3]}"
        bodies = {bytes(m.data) for ms in stored(server.broker, "restart", [0]).values() for m in ms}
        missing = set(acked) - bodies
        assert not missing, f"{len(missing)} acknowledged messages not stored, e.g. {sorted(missing)[:3]}"
    finally:
        server.stop()
