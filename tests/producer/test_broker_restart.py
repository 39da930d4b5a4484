"""A producer across a real server restart (issue 22 item 9): the server process (master + broker) is
SIGKILLed and started again on the same ports and data directory while messages are queued.

What must hold: messages sent while the server is down are not failed at once with a fast
TubeMQConnectionError; they wait for the broker, within their send timeout, and are acknowledged
once it is back (pipelined ``send_async`` and blocking ``send`` from another thread alike); every
acknowledged message is read back after the restart. The outage and recovery times are printed.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from _support import needs_sigkill
from _support.serve import ServerProcess

import tubemq
from tubemq.errors import TubeMQError


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
        server.create_topic("restart", partitions=1)
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
            resent = p.metrics()["counters"]["producer.retried"]  # e.g. written to the dead connection
        print(f"server down at 0.00 s, restart started at 1.50 s, every queued send done at "
              f"{t_done - t_kill:.2f} s; acknowledged {len(acked)}, failed {len(failed)}, resent {resent}")
        kinds = sorted({type(e).__name__ for _, e in failed})
        assert not failed, f"{len(failed)} sends failed during the restart ({kinds}): {failed[:3]}"
        bodies = {bytes(m.data) for ms in stored(server.broker, "restart", [0]).values() for m in ms}
        missing = set(acked) - bodies
        assert not missing, f"{len(missing)} acknowledged messages not stored, e.g. {sorted(missing)[:3]}"
    finally:
        server.stop()
