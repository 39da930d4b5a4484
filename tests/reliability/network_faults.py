"""Network-fault scenario shared by the reliability tests (short faults) and ``bench/soak.py`` (long).

:func:`group_through_fault`: an embedded cluster behind fault proxies (``tubemq.testing.proxy_cluster``
or the plugin's ``tubemq_proxies``: the master and every broker, so every client byte crosses a proxy); a producer sends numbered
messages and a consumer group of ``members`` consumes them. Once every partition delivers, the fault
is applied to all proxies for ``seconds``, then healed. Measured: the *recovery*, from the heal until
every partition has delivered a message acknowledged after the heal (the group consumes again
everywhere), and after a drain, every acknowledged message not delivered (*lost*). Errors the clients
raised that are not ``TubeMQError`` are *untyped*.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

import tubemq
from tubemq.errors import TubeMQError
from tubemq.testing import ClusterProxies

PAYLOAD = b"n%09d"
FAULTS = ("blackhole", "reset", "vanish", "half_open")


@dataclass
class FaultResult:
    fault: str
    seconds: float
    acked: int = 0
    delivered: int = 0  # distinct acknowledged ids delivered
    lost: int = 0  # acknowledged, never delivered (after the drain)
    recovery_s: float | None = None  # heal -> every partition delivered a message acked after the heal
    send_errors: int = 0  # typed send failures during the fault (expected)
    untyped_errors: int = 0
    released: int = 0  # registrations members released after the brokers answered again
    heartbeat_failures: int = 0  # failed master heartbeats of all members (bounded: no busy retry)
    partitions: int = 0
    errors: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        rec = "none" if self.recovery_s is None else f"{self.recovery_s:.2f} s"
        return (f"{self.fault} {self.seconds:g} s: recovery {rec}, {self.acked} acked, {self.lost} lost, "
                f"{self.send_errors} send errors, {self.untyped_errors} untyped, "
                f"{self.released} registrations released, {self.heartbeat_failures} failed heartbeats")


class _Group:
    """Producer and consumer threads and what they saw (ack and delivery times per id)."""

    def __init__(self, master: str, topic: str, group: str, members: int, client_opts: dict[str, Any]) -> None:
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.stop_producing = threading.Event()
        self.acked: dict[int, float] = {}
        self.delivered: set[int] = set()
        #: partition key -> monotonic time of its latest delivery of a message acked at that time
        self.last_by_partition: dict[str, list[tuple[int, float]]] = {}
        self.res = FaultResult("", 0.0)
        self.producer = tubemq.Producer(master, **{k: v for k, v in client_opts.items() if k in _PRODUCER_OPTS})
        self.consumers = [tubemq.Consumer(master, group=group, topics=[topic], consume_from="earliest",
                                          **client_opts) for _ in range(members)]
        self.topic = topic
        self.threads = [threading.Thread(target=self._produce, daemon=True)]
        self.threads += [threading.Thread(target=self._consume, args=(c,), daemon=True) for c in self.consumers]
        for t in self.threads:
            t.start()

    def _produce(self) -> None:
        i = 0
        while not self.stop_producing.is_set():
            try:
                self.producer.send(self.topic, PAYLOAD % i)
            except TubeMQError:
                self.res.send_errors += 1
                time.sleep(0.05)
                continue
            except Exception as exc:  # noqa: BLE001 - counted: the scenario's point
                self.res.untyped_errors += 1
                self.res.errors.append(f"send: {exc!r}")
                time.sleep(0.05)
                continue
            with self.lock:
                self.acked[i] = time.monotonic()
            i += 1
            time.sleep(0.005)

    def _consume(self, consumer: tubemq.Consumer) -> None:
        while not self.stop.is_set():
            try:
                batch = consumer.poll(0.2)
                if batch is None:
                    continue
                now = time.monotonic()
                ids = [int(bytes(m.data)[1:]) for m in batch]
                consumer.confirm(batch)
            except tubemq.errors.ClientClosedError:
                return
            except TubeMQError:
                continue
            except Exception as exc:  # noqa: BLE001
                self.res.untyped_errors += 1
                self.res.errors.append(f"consume: {exc!r}")
                continue
            with self.lock:
                self.delivered.update(ids)
                self.last_by_partition[batch.partition.key] = [(i, now) for i in ids[-1:]]

    def partitions_since(self, t: float) -> set[str]:
        """Partitions that delivered a message acknowledged after ``t``."""
        with self.lock:
            return {k for k, seen in self.last_by_partition.items()
                    if any(self.acked.get(i, 0.0) > t for i, _ in seen)}

    def missing(self) -> int:
        with self.lock:
            return sum(1 for i in self.acked if i not in self.delivered)

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(15)
        for c in self.consumers:
            counters = c._core.metrics.snapshot()["counters"]
            self.res.released += counters.get("consumer.registrations_released", 0)
            self.res.heartbeat_failures += counters.get("master.heartbeat_failures", 0)
            c.close()
        self.producer.close()


_PRODUCER_OPTS = {"heartbeat_period_ms", "register_retry_wait_ms", "rpc_timeout_ms", "connect_timeout_ms"}


def _wait(cond: Any, limit: float) -> float | None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        if cond():
            return time.monotonic() - t0
        time.sleep(0.05)
    return None


def group_through_fault(cluster: Any, proxies: ClusterProxies, fault: str, seconds: float, *, topic: str,
                        partitions: int, members: int = 2, client_opts: dict[str, Any] | None = None,
                        recover_limit: float = 90.0, drain_limit: float = 60.0) -> FaultResult:
    """One fault on a running ``cluster`` behind ``proxies`` (topic ``topic`` with ``partitions``
    created here)."""
    if fault not in FAULTS:
        raise ValueError(f"fault must be one of {FAULTS}, got {fault!r}")
    cluster.create_topic(topic, partitions=partitions)
    g = _Group(proxies.master_address, topic, f"g_{topic}", members, dict(client_opts or {}))
    try:
        t_start = time.monotonic()
        if _wait(lambda: len(g.partitions_since(t_start)) == partitions, 60.0) is None:
            g.res.errors.append(f"the group never consumed from all {partitions} partitions before the fault")
        getattr(proxies, fault)()
        time.sleep(seconds)
        t_heal = time.monotonic()
        proxies.heal()
        g.res.recovery_s = _wait(lambda: len(g.partitions_since(t_heal)) == partitions, recover_limit)
        g.stop_producing.set()
        g.threads[0].join(30)
        _wait(lambda: g.missing() == 0, drain_limit)
    finally:
        g.close()
    res = g.res
    res.fault, res.seconds, res.partitions = fault, seconds, partitions
    res.acked = len(g.acked)
    res.delivered = len(g.delivered & set(g.acked))
    res.lost = g.missing()
    return res
