"""A producer across a real server restart (issue 22 item 9): the server process (master + broker) is
SIGKILLed and started again on the same ports and data directory while messages are queued.

What must hold: messages sent while the server is down are not failed at once with a fast
TubeMQConnectionError; they wait for the broker, within their send timeout, and are acknowledged
once it is back (pipelined ``send_async`` and blocking ``send`` from another thread alike); every
acknowledged message is read back after the restart. The outage and recovery times are printed.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import tubemq
from tubemq.errors import TubeMQError


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"server did not open port {port} within {timeout} s")


class ServerProcess:
    """``python -m tubemq.server`` in a child process, restartable on the same ports and data dir."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.mport, self.bport, self.aport = _free_ports(3)
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tubemq.server", "--data-dir", str(self.data_dir), "--master-port",
             str(self.mport), "--broker-port", str(self.bport), "--admin-port", str(self.aport),
             "--log-level", "WARNING"],
        )
        for port in (self.mport, self.bport, self.aport):
            _wait_port(port, self.proc)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
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
        return f"127.0.0.1:{self.mport}"

    def create_topic(self, topic: str) -> None:
        url = (f"http://127.0.0.1:{self.aport}/webapi.htm?type=op_modify&method=admin_add_new_topic_record"
               f"&topicName={topic}&numPartitions=1&brokerId=1&createUser=test")
        with urllib.request.urlopen(url, timeout=30) as r:
            body = json.loads(r.read())
        assert body["result"], body


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
        bodies = {bytes(m.data) for ms in stored(f"127.0.0.1:{server.bport}", "restart", [0]).values() for m in ms}
        missing = set(acked) - bodies
        assert not missing, f"{len(missing)} acknowledged messages not stored, e.g. {sorted(missing)[:3]}"
    finally:
        server.stop()
