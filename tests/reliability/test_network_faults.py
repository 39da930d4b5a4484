"""A consumer group through network faults, via the pytest plugin's ``tubemq_cluster`` and
``tubemq_proxies`` (every client byte crosses a :class:`tubemq.testing.FaultProxy`).

Outcomes asserted, never speed: the group consumes again from every partition after the fault,
nothing acknowledged is lost, every client error is typed. Faults are short (3 s) to keep the suite
fast; bench/soak.py runs the 10 s / 40 s versions and prints the recovery times.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from _support import FAST_CLIENT, wait_for

import tubemq
from reliability.network_faults import group_through_fault

#: client timers of a real deployment except the rpc/connect timeouts (faults cost a timeout each)
#: and the heartbeat period (a rebalance is carried by a heartbeat answer)
CLIENT: dict[str, Any] = {"rpc_timeout_ms": 3000, "connect_timeout_ms": 1000, "heartbeat_period_ms": 1000}


@pytest.mark.parametrize("fault", ["blackhole", "reset", "vanish", "half_open"])
@pytest.mark.tubemq_cluster(consumer_reg_timeout_ms=30000)
def test_group_resumes_after_a_network_fault(tubemq_cluster: Any, tubemq_proxies: Any, fault: str) -> None:
    res = group_through_fault(tubemq_cluster, tubemq_proxies, fault, 3.0, topic=f"nf_{fault}", partitions=4,
                              client_opts=CLIENT, recover_limit=60.0, drain_limit=60.0)
    print(res)
    assert res.errors == []
    assert res.untyped_errors == 0
    assert res.recovery_s is not None, "the group did not consume from every partition again"
    assert res.acked > 0 and res.lost == 0, res
    # heartbeats are retried at a wait, never in a busy loop (a few per member per second at most)
    assert res.heartbeat_failures < 60, res


@pytest.mark.tubemq_cluster(topics={"nf_hb": 1})
def test_master_heartbeats_resume_soon_after_many_failures(tubemq_proxies: Any) -> None:
    """More than 5 failed heartbeats in a row: the next one comes within the retry cap of the network's
    return (``heartbeat_fail_wait_ms``, 2 s), not after Java's 60 s pause."""
    opts = {**CLIENT, "heartbeat_period_ms": 500, "register_retry_wait_ms": 100}
    with tubemq.Consumer(tubemq_proxies.master_address, group="g_hb", topics=["nf_hb"], **opts) as c:
        session = c._core.session
        wait_for(lambda: c._core.metrics.snapshot()["counters"].get("master.heartbeats", 0) >= 1, 30,
                 "a first heartbeat")
        tubemq_proxies.master.reset()
        failures = lambda: c._core.metrics.snapshot()["counters"].get("master.heartbeat_failures", 0)  # noqa: E731
        wait_for(lambda: failures() >= 6, 30, "six failed heartbeats")
        time.sleep(2.5)  # a few more at the capped wait
        ok_before = c._core.metrics.snapshot()["counters"]["master.heartbeats"]
        t_heal = time.monotonic()
        tubemq_proxies.heal()
        wait_for(lambda: c._core.metrics.snapshot()["counters"]["master.heartbeats"] > ok_before, 20,
                 "a heartbeat that the master answered after the network returned")
        print(f"{failures()} heartbeats failed; the first one answered came "
              f"{time.monotonic() - t_heal:.2f} s after the heal")
        assert session.registered or session.heartbeats_sent > 0


@pytest.mark.tubemq_cluster(topics={"nf_orphan": 2}, consumer_reg_timeout_ms=30000)
def test_a_member_releases_registrations_it_let_go_of_when_the_broker_answers(
        tubemq_cluster: Any, tubemq_proxies: Any) -> None:
    """A's broker connections are reset while a rebalance takes a partition from it: its unregister
    fails. Once the broker answers, A releases that registration itself, so B gets the partition long
    before the broker would expire A's registration (30 s here), and every partition is held again."""
    opts = {**FAST_CLIENT, "consume_from": "earliest"}
    master = tubemq_proxies.master_address
    broker = tubemq_cluster.server.node().broker
    held_by = lambda: tubemq_cluster._call(  # noqa: E731 - the broker's registrations, on its loop
        lambda: {k[2]: r.consumer_id for k, r in broker.registrations.items() if k[1] == "nf_orphan"})
    with tubemq.Consumer(master, group="g_orphan", topics=["nf_orphan"], **opts) as a:
        wait_for(lambda: len(a.assignment()) == 2, 30, "A holding both partitions")
        tubemq_proxies.brokers[1].reset()  # A's broker connections (and B's to come) are reset
        with tubemq.Consumer(master, group="g_orphan", topics=["nf_orphan"], **opts) as b:
            wait_for(lambda: a._core.orphans or a._core.metrics.snapshot()["counters"]["consumer.partitions_lost"],
                     30, "A letting go of a partition without the broker hearing it")
            time.sleep(1.0)
            t_heal = time.monotonic()
            tubemq_proxies.brokers[1].heal()
            wait_for(lambda: len(set(held_by())) == 2 and len(a.assignment()) + len(b.assignment()) == 2
                     and len(b.assignment()) >= 1, 20,
                     "both partitions registered again, B holding one (before the broker's 30 s expiry)")
            print(f"both partitions held again {time.monotonic() - t_heal:.2f} s after the heal: {held_by()}")
            released = a._core.metrics.snapshot()["counters"]["consumer.registrations_released"]
            assert released >= 1
