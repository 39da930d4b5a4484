"""When the first master heartbeat goes out, against the REAL master's recorded answers.

The Java clients (captures s1, s2, s5): a consumer sends its first master heartbeat right after
register (s2: register answered at 1144 ms, heartbeat at 1169 ms; then every 13 s); a producer sends
none until its first publish, then the publish heartbeat and its first periodic heartbeat right
after it (s1: +18 ms; then every 13 s). Every client below runs with a 60 s heartbeat period, so a
first heartbeat that waits one period fails the test's 10 s deadline instead of slowing it down.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from _support.aio import aclose_all

import tubemq
from tubemq.protocol.constants import Method

from .consumer_replay import ConsumerReplay
from .replay import Deadline, ReplayServer, load, run
from .test_bound_vs_capture import BoundReplay
from .test_producer_vs_capture import _servers

JAVA_IP = "192.0.2.2"
PERIOD_MS = 60000  # far beyond every deadline below


def _methods(server: ReplayServer) -> list[int]:
    return [s.method for s in server.log]


def _java_gaps(name: str, register: int, heartbeat: int) -> list[float]:
    """ms between the Java client's register and its heartbeats in capture ``name``."""
    cap = load(name)
    reg = cap.requests(register)[0].t_ms
    return [f.t_ms - reg for f in cap.requests(heartbeat)]


def _heartbeat_follows_register(rp: Any, client: Callable[[str], Any], register: int, heartbeat: int) -> None:
    """``client(master_address)`` against ``rp``'s real answers: its first two master requests are
    ``register`` then ``heartbeat``, the heartbeat within 10 s (not one 60 s period later)."""

    async def body() -> None:
        broker = await ReplayServer("broker", rp.broker).start()
        master = await ReplayServer("master", rp.master).start()
        c = client(master.address)
        rp.bind(c.client_id, broker)
        try:
            await c.start()
            await Deadline(10).until(lambda: master.requests(heartbeat), "first heartbeat")
            assert _methods(master)[:2] == [register, heartbeat]
        finally:
            await aclose_all(c, master, broker)

    run(body(), 30)


def test_consumer_heartbeats_right_after_register() -> None:
    gaps = _java_gaps("s2_consumer_pull", Method.MASTER_CONSUMER_REGISTER, Method.MASTER_CONSUMER_HEARTBEAT)
    assert gaps[0] < 100 and 12900 < gaps[1] - gaps[0] < 13100  # what Java did: at once, then 13 s
    rp = ConsumerReplay(load("s2_consumer_pull"), master_conn=1, broker_conn=2)
    _heartbeat_follows_register(
        rp, lambda master: tubemq.aio.Consumer(master, group=rp.group, topics=["cap_main"], local_address=JAVA_IP,
                                               heartbeat_period_ms=PERIOD_MS, pool="private"),
        Method.MASTER_CONSUMER_REGISTER, Method.MASTER_CONSUMER_HEARTBEAT)


def test_bound_consumer_heartbeats_right_after_register() -> None:
    gaps = _java_gaps("s5_client_balance", Method.MASTER_CONSUMER_REGISTER_V2, Method.MASTER_CONSUMER_HEARTBEAT_V2)
    assert gaps[0] < 100
    rp = BoundReplay()
    _heartbeat_follows_register(
        rp, lambda master: tubemq.aio.BoundConsumer(master, rp.group, ["cap_main"], source_count=1, node_id=0,
                                                    local_address=JAVA_IP, heartbeat_period_ms=PERIOD_MS,
                                                    pool="private"),
        Method.MASTER_CONSUMER_REGISTER_V2, Method.MASTER_CONSUMER_HEARTBEAT_V2)


def test_producer_periodic_heartbeats_start_at_the_first_publish() -> None:
    gaps = _java_gaps("s1_producer", Method.MASTER_PRODUCER_REGISTER, Method.MASTER_PRODUCER_HEARTBEAT)
    assert gaps[1] - gaps[0] < 100 and 12900 < gaps[2] - gaps[1] < 13100  # publish hb, periodic at once, 13 s
    cap = load("s1_producer")

    async def body() -> None:
        master, broker = await _servers(cap)
        producer: Any = tubemq.aio.Producer(master.address, local_address=JAVA_IP, heartbeat_period_ms=PERIOD_MS,
                                            pool="private")
        try:
            await producer.start()
            assert _methods(master) == [Method.MASTER_PRODUCER_REGISTER]  # nothing published: no heartbeat
            assert await producer.publish(["cap_store2", "cap_main"]) == {"cap_store2", "cap_main"}
            publish_hb = master.requests(Method.MASTER_PRODUCER_HEARTBEAT)
            assert len(publish_hb) == 1
            # the first periodic heartbeat follows the publish heartbeat, not one period later
            await Deadline(10).until(lambda: len(master.requests(Method.MASTER_PRODUCER_HEARTBEAT)) >= 2,
                                     "first periodic heartbeat")
            assert _methods(master)[:3] == [Method.MASTER_PRODUCER_REGISTER] + [Method.MASTER_PRODUCER_HEARTBEAT] * 2
        finally:
            await aclose_all(producer, master, broker)

    run(body(), 30)
