"""Separate broker processes, one SIGKILLed in the middle of a pipelined produce.

What is checked (and printed): the sends fail only around the kill, typed; later sends go to the
surviving brokers (reroute time = last failure - kill); after the broker restarts, every acknowledged
message is read back (embedded brokers acknowledge once the message was handed to the OS, so a
SIGKILL loses nothing acknowledged); duplicates counted.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

from _support import needs_sigkill

import tubemq
from tubemq.errors import TubeMQError

from .procs import BROKER_TIMEOUT_MS, ProcCluster

TOTAL = 100_000
KILL_AFTER = 30_000
PRODUCER_HB_MS = 1000
#: Documented figure: sends stop failing within the master's broker timeout plus one producer heartbeat
#: (the client also stops using a broker whose connection dropped at once); printed, not asserted: a
#: loaded machine takes several times as long (17.9 s measured on a busy 2-core machine).
REROUTE_EXPECTED_S = (BROKER_TIMEOUT_MS + 2 * PRODUCER_HB_MS) / 1000 + 2.0
#: What is asserted: the sends do stop failing (the producer reroutes), within a generous limit.
REROUTE_LIMIT_S = 90.0


def read_back(master: str, topic: str, want: set[bytes], timeout: float) -> tuple[Counter[bytes], float]:
    seen: Counter[bytes] = Counter()
    t0 = time.monotonic()
    with tubemq.Consumer(master, group="verify", topics=[topic], consume_from="earliest",
                         heartbeat_period_ms=1000, iter_timeout_ms=3000) as consumer:
        deadline = t0 + timeout
        while time.monotonic() < deadline and not want <= seen.keys():
            batch = consumer.poll(timeout=1.0)
            if batch is None:
                continue
            for msg in batch:
                seen[bytes(msg.data)] += 1
            consumer.confirm(batch)
    return seen, time.monotonic() - t0


@needs_sigkill
def test_sigkill_one_broker_during_pipelined_produce(tmp_path: Path) -> None:
    with ProcCluster(tmp_path, brokers=3) as c:
        c.create_topic("kill", 2)
        failures: list[tuple[float, BaseException]] = []
        kill_at: list[float] = []
        futures = []

        def on_done(result: Any, exc: BaseException | None) -> None:
            if exc is not None:  # runs on the client's loop thread when the send fails: the real time
                failures.append((time.monotonic(), exc))

        with tubemq.Producer(c.master_address, heartbeat_period_ms=PRODUCER_HB_MS) as producer:
            t_start = time.monotonic()
            for i in range(TOTAL):
                data = b"m%06d" % i
                fut = producer.send_async("kill", data, callback=on_done)
                futures.append((data, fut))
                if not kill_at and i >= KILL_AFTER:
                    kill_at.append(c.kill_broker(2))
            deadline = time.monotonic() + 120
            results: dict[bytes, Any] = {}
            for data, fut in futures:
                try:
                    results[data] = fut.result(max(0.1, deadline - time.monotonic()))
                except Exception:  # noqa: BLE001, S112 - recorded by on_done (typed or not)
                    continue
            t_produce = time.monotonic() - t_start
        t_kill = kill_at[0]
        untyped = [e for _, e in failures if not isinstance(e, TubeMQError)]
        last_fail = max((t for t, _ in failures), default=t_kill)
        per_broker = Counter(r.partition.broker_id for r in results.values())
        # the broker comes back; everything acknowledged must be readable
        c.start_broker(2)
        c.wait_brokers(lambda b: b["online"], 3)
        seen, t_read = read_back(c.master_address, "kill", set(results), timeout=90)
        lost = [d for d in results if d not in seen]
        dups = sum(n - 1 for n in seen.values() if n > 1)
        print(
            f"\nproduce {TOTAL} in {t_produce:.1f} s: acked {len(results)} (per broker {dict(sorted(per_broker.items()))}),"
            f" failed {len(failures)} ({Counter(type(e).__name__ for _, e in failures)}),"
            f" reroute (last failure - kill) {last_fail - t_kill:.3f} s (expected {REROUTE_EXPECTED_S:.1f} s on an idle machine);"
            f" read back {sum(seen.values())} in {t_read:.1f} s: lost {len(lost)}, duplicates {dups}"
        )
        assert not untyped, untyped[:3]
        assert len(results) + len(failures) == TOTAL
        assert not lost, f"{len(lost)} acknowledged messages lost, e.g. {lost[:5]}\n{c.logs()}"
        assert last_fail - t_kill <= REROUTE_LIMIT_S, f"sends still failed {last_fail - t_kill:.1f} s after the kill"
        assert per_broker[1] and per_broker[3]
