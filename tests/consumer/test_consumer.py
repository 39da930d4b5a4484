"""Consumer against the embedded server over real TCP (server-side balancing)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

import tubemq
from tubemq.errors import ClientClosedError, ConfigError

from ._produce import produce
from .conftest import FAST_CLIENT, drain, quiet, wait_for


def consumer(cluster: Any, group: str, topics: Any, **kw: Any) -> tubemq.Consumer:
    opts = {**FAST_CLIENT, "consume_from": "earliest", **kw}
    return tubemq.Consumer(cluster.master_address, group=group, topics=topics, **opts)


def test_single_consumer_reads_everything_from_earliest(cluster: Any) -> None:
    cluster.create_topic("single", partitions=3)
    bodies = [b"msg-%04d" % i for i in range(300)]
    produce(cluster, "single", bodies[:150], partitions=3, attrs={"k": "v"})
    produce(cluster, "single", bodies[150:], partitions=3, msg_type="s1")
    with consumer(cluster, "g_single", ["single"]) as c:
        got = drain(c, 300)
        assert sorted(m.data for m in got) == bodies
        assert not quiet(c, 0.3)  # nothing twice
        by_part: dict[int, list[bytes]] = {}
        for m in got:
            assert m.topic == "single" and m.partition is not None and m.offset is None
            by_part.setdefault(m.partition.partition_id, []).append(m.data)
            if m.data < b"msg-0150":
                assert m.attributes == {"k": "v"} and m.stream_id is None
            else:
                assert m.stream_id == "s1"
        assert sorted(by_part) == [0, 1, 2]
        for datas in by_part.values():  # each partition in the order it was sent (round-robin bodies)
            assert datas == sorted(datas) and len(set(datas)) == len(datas)
        assert sorted(p.partition_id for p in c.assignment()) == [0, 1, 2]
        snap = c.metrics()
        assert snap["counters"]["consumer.messages"] == 300


def test_iteration_auto_confirms_and_latest_skips_backlog(cluster: Any) -> None:
    cluster.create_topic("iter", partitions=2)
    produce(cluster, "iter", [b"a%d" % i for i in range(40)], partitions=2)
    with consumer(cluster, "g_iter", ["iter"], iter_timeout_ms=1500) as c:
        got = [m.data for m in c]
    assert sorted(got) == sorted(b"a%d" % i for i in range(40))
    # same group again: everything was confirmed by the iteration, nothing comes back
    with consumer(cluster, "g_iter", ["iter"], iter_timeout_ms=800) as c:
        assert [m.data for m in c] == []
    # a new group with consume_from=latest starts at the end of the partitions
    with consumer(cluster, "g_iter_latest", ["iter"], consume_from="latest") as c:
        wait_for(lambda: len(c.assignment()) == 2, what="assignment")
        assert not quiet(c, 0.3)
        produce(cluster, "iter", [b"new"], partitions=1)
        assert [m.data for m in drain(c, 1)] == [b"new"]


def test_unconfirmed_batch_is_redelivered(cluster: Any) -> None:
    cluster.create_topic("redo", partitions=1)
    produce(cluster, "redo", [b"r%d" % i for i in range(5)])
    with consumer(cluster, "g_redo", ["redo"]) as c:
        first = wait_for(lambda: c.poll(0.2), what="first batch")
        ids = [m.message_id for m in first]
        assert c.confirm(first, consumed=False)
        assert not c.confirm(first, consumed=True)  # a batch is confirmed once
        again = wait_for(lambda: c.poll(0.2), what="re-delivery")
        assert [m.message_id for m in again] == ids
        # left unconfirmed at close: re-delivered to the next member of the group
    with consumer(cluster, "g_redo", ["redo"]) as c:
        got = drain(c, 5)
        assert [m.message_id for m in got][: len(ids)] == ids  # the rolled-back batch comes first
        assert sorted(m.data for m in got) == [b"r%d" % i for i in range(5)]
        assert not quiet(c, 0.3)
    with consumer(cluster, "g_redo", ["redo"]) as c:
        assert not quiet(c, 0.8)  # confirmed by the previous member


def test_remote_and_local_confirm_commit(cluster: Any) -> None:
    cluster.create_topic("commit", partitions=1)
    produce(cluster, "commit", [b"c%d" % i for i in range(3)])
    with consumer(cluster, "g_commit", ["commit"]) as c:
        batch = wait_for(lambda: c.poll(0.2), what="batch")
        assert c.confirm(batch)
        assert batch.next_offset == batch.start_offset + 28 * len(batch)  # commit RPC answered
    with consumer(cluster, "g_commit2", ["commit"], confirm_in_local=True) as c:
        got = drain(c, 3)
        assert len(got) == 3
    with consumer(cluster, "g_commit2", ["commit"]) as c:
        assert not quiet(c, 0.8)  # the local confirm was committed by unregister(readStatus 0)


def test_local_confirm_gives_the_exact_next_offset(cluster: Any) -> None:
    """With confirm_in_local the commit rides on the partition's next getMessage, whose answer starts at
    the committed offset: each batch's next_offset is exact (the next batch's start, between the
    producer's append offsets) once its partition's next batch is delivered, in a shared store too."""
    cluster.create_topic("lcl", partitions=3)  # one store: the partitions' index entries interleave
    first = produce(cluster, "lcl", [b"a%02d" % i for i in range(30)], partitions=3)
    batches: dict[str, list[Any]] = {}
    with consumer(cluster, "g_lcl", ["lcl"], confirm_in_local=True) as c:
        def take(n: int) -> None:
            got = 0
            deadline = time.monotonic() + 30
            while got < n and time.monotonic() < deadline:
                batch = c.poll(0.2)
                if batch is not None:
                    assert c.confirm(batch) is True
                    batches.setdefault(batch.partition.key, []).append(batch)
                    got += len(batch)
            assert got == n

        take(30)
        second = produce(cluster, "lcl", [b"b%d" % i for i in range(3)], partitions=3)
        take(3)
    appended: dict[str, list[int]] = {}
    for i, r in enumerate([*first, *second]):
        appended.setdefault(f"1:lcl:{i % 3}", []).append(r.append_offset)
    assert sorted(batches) == sorted(appended)
    for key, seq in batches.items():
        offs, taken = appended[key], 0
        for prev, cur in zip(seq, seq[1:], strict=False):
            taken += len(prev)
            assert prev.next_offset == cur.start_offset, key
            # after the batch's last message, at or before the partition's next one
            assert offs[taken - 1] < prev.next_offset <= offs[taken], key
        assert seq[-1].next_offset == -1  # its commit rides on a fetch that has not answered yet


def test_filters_by_stream_id(cluster: Any) -> None:
    cluster.create_topic("flt", partitions=2)
    kinds = ["typeA", "typeB", "typeC", None]
    for i in range(40):
        k = kinds[i % 4]
        produce(cluster, "flt", [b"f%d-%s" % (i, (k or "none").encode())], partitions=1, msg_type=k)
    with consumer(cluster, "g_flt", {"flt": {"typeA", "typeC"}}) as c:
        got = drain(c, 20)
        assert {m.stream_id for m in got} == {"typeA", "typeC"}
        assert not quiet(c, 0.5)


def test_two_and_three_members_join_and_leave(cluster: Any) -> None:
    cluster.create_topic("grp", partitions=6)
    group = "g_grp"
    delivered: list[tuple[str, str, float, float, bytes]] = []
    lock = threading.Lock()
    stops: dict[str, threading.Event] = {}
    threads: dict[str, threading.Thread] = {}
    members: dict[str, tubemq.Consumer] = {}

    def run(name: str) -> None:
        c = members[name]
        while not stops[name].is_set():
            b = c.poll(0.1)
            if b is None:
                continue
            t0 = time.monotonic()
            time.sleep(0.002)  # "processing"
            c.confirm(b)  # a failed confirm would re-deliver: caught by the no-duplicates check
            t1 = time.monotonic()
            with lock:
                for m in b:
                    delivered.append((name, b.partition.key, t0, t1, m.data))

    def join(name: str) -> None:
        members[name] = consumer(cluster, group, ["grp"])
        stops[name] = threading.Event()
        threads[name] = threading.Thread(target=run, args=(name,), daemon=True)
        threads[name].start()

    def leave(name: str) -> None:
        stops[name].set()
        threads[name].join(10)
        members[name].close()

    def share(names: list[str]) -> list[int]:
        return [len(members[n].assignment()) for n in names]

    sent: list[bytes] = []

    def send(n: int) -> None:
        bodies = [b"g%05d" % (len(sent) + i) for i in range(n)]
        produce(cluster, "grp", bodies, partitions=6)
        sent.extend(bodies)

    try:
        join("a")
        wait_for(lambda: share(["a"]) == [6], what="a owns 6")
        send(120)
        join("b")
        wait_for(lambda: sorted(share(["a", "b"])) == [3, 3], what="3/3 split")
        send(120)
        join("c")
        wait_for(lambda: sorted(share(["a", "b", "c"])) == [2, 2, 2], what="2/2/2 split")
        send(120)
        leave("b")
        wait_for(lambda: sorted(share(["a", "c"])) == [3, 3], what="3/3 after b left")
        send(120)
        wait_for(lambda: len(delivered) >= len(sent), timeout=20, what="all delivered")
        time.sleep(0.3)
    finally:
        for name in list(members):
            if not stops[name].is_set():
                leave(name)
    got = [d[4] for d in delivered]
    assert sorted(got) == sorted(sent)  # every message, and no duplicates (graceful joins/leaves only)
    # no partition was read by two members at the same time
    by_part: dict[str, list[tuple[float, float, str]]] = {}
    for name, key, t0, t1, _ in delivered:
        by_part.setdefault(key, []).append((t0, t1, name))
    for intervals in by_part.values():
        intervals.sort()
        for (_s0, e0, n0), (s1, _e1, n1) in zip(intervals, intervals[1:], strict=False):
            if n0 != n1:
                assert s1 >= e0, "partition read by two members at once"


def test_killed_member_partitions_move_after_expiry(cluster: Any) -> None:
    cluster.create_topic("kill", partitions=2)
    produce(cluster, "kill", [b"k%d" % i for i in range(20)], partitions=2)
    victim = consumer(cluster, "g_kill", ["kill"], pool="private")
    try:
        wait_for(lambda: len(victim.assignment()) == 2, what="victim owns both")
        held = victim.poll(2.0)  # fetched and never confirmed: must come back after the failure
        assert held is not None
        # kill it: no unregister, no close, no more heartbeats
        victim._aio._finalizer.detach()  # a killed process runs no finalizer
        victim._portal.run(_abort(victim))
        survivor = consumer(cluster, "g_kill", ["kill"])
        with survivor:
            got = drain(survivor, 20, timeout=40)
            assert sorted(m.data for m in got) == sorted(b"k%d" % i for i in range(20))
            assert sorted(p.partition_id for p in survivor.assignment()) == [0, 1]
    finally:
        victim._portal.close(asyncio.sleep(0))  # only lets go of the loop thread


async def _abort(c: tubemq.Consumer) -> None:
    core = c._core
    core.closing = True
    for t in list(core._tasks.values()):
        t.cancel()
    await core.workers.stop()
    hb = core.session._hb_task
    if hb is not None:
        hb.cancel()
    core.session.closed = True
    await core.session.pool.close()  # private pool: its sockets drop like a crashed process's


def test_master_restart_reregisters_and_continues(cluster: Any) -> None:
    cluster.create_topic("mrs", partitions=2)
    with consumer(cluster, "g_mrs", ["mrs"]) as c:
        wait_for(lambda: len(c.assignment()) == 2, what="assignment")
        produce(cluster, "mrs", [b"before%d" % i for i in range(10)], partitions=2)
        assert len(drain(c, 10)) == 10
        regs = c._core.session.registrations
        cluster.restart_master()
        produce(cluster, "mrs", [b"after%d" % i for i in range(10)], partitions=2)
        assert sorted(m.data for m in drain(c, 10, timeout=20)) == sorted(b"after%d" % i for i in range(10))
        wait_for(lambda: c._core.session.registrations > regs, timeout=20, what="re-registration")
        # the new master knows this member: a second member gets a share of the partitions
        with consumer(cluster, "g_mrs", ["mrs"]) as c2:
            wait_for(lambda: len(c.assignment()) == 1 and len(c2.assignment()) == 1, timeout=20,
                     what="1/1 split after restart")


def test_push_mode_with_pause_and_resume(cluster: Any) -> None:
    cluster.create_topic("push", partitions=2)
    seen: list[bytes] = []
    cond = threading.Condition()

    def listener(msg: Any) -> None:
        with cond:
            seen.append(msg.data)
            cond.notify_all()

    with consumer(cluster, "g_push", ["push"]) as c:
        c.subscribe(listener)
        produce(cluster, "push", [b"p%d" % i for i in range(10)], partitions=2)
        wait_for(lambda: len(seen) == 10, what="first 10 pushed")
        c.pause()
        assert c.paused
        time.sleep(0.2)  # let an in-progress dispatch finish
        produce(cluster, "push", [b"q%d" % i for i in range(10)], partitions=2)
        time.sleep(0.5)
        assert len(seen) == 10  # paused: nothing delivered
        c.resume()
        wait_for(lambda: len(seen) == 20, what="rest after resume")
    assert sorted(seen) == sorted([b"p%d" % i for i in range(10)] + [b"q%d" % i for i in range(10)])


def test_close_from_inside_listener_and_no_callback_after_close(cluster: Any) -> None:
    cluster.create_topic("inside", partitions=1)
    produce(cluster, "inside", [b"i%d" % i for i in range(5)])
    c = consumer(cluster, "g_inside", ["inside"])
    calls: list[float] = []
    closed_at: list[float] = []

    def listener(msg: Any) -> None:
        calls.append(time.monotonic())
        if len(calls) == 1:
            c.close()  # from the dispatcher thread itself: must not deadlock
            closed_at.append(time.monotonic())

    c.subscribe(listener)
    wait_for(lambda: closed_at, what="close inside listener")
    assert c.closed
    time.sleep(0.3)
    assert len(calls) == 1  # no callback after close
    with pytest.raises(ClientClosedError):
        c.poll(0.1)


def test_close_while_listener_runs_and_during_fetch(cluster: Any) -> None:
    cluster.create_topic("busy", partitions=2)
    produce(cluster, "busy", [b"b%d" % i for i in range(50)], partitions=2)
    c = consumer(cluster, "g_busy", ["busy"])
    entered = threading.Event()
    calls: list[int] = []

    def slow(msg: Any) -> None:
        calls.append(1)
        entered.set()
        time.sleep(0.3)

    c.subscribe(slow)
    assert entered.wait(15)
    c.close()  # the listener is mid-call
    n = len(calls)
    time.sleep(0.5)
    assert len(calls) == n  # nothing after close returned
    # the unconfirmed batch was rolled back: a new member gets every message
    with consumer(cluster, "g_busy", ["busy"]) as c2:
        got = drain(c2, 50 - 0, timeout=20)
        assert len({m.data for m in got}) == 50


def test_close_unblocks_poll_and_is_idempotent(cluster: Any) -> None:
    cluster.create_topic("idle", partitions=1)
    c = consumer(cluster, "g_idle", ["idle"])
    result: list[Any] = []
    t = threading.Thread(target=lambda: result.append(c.poll(None)), daemon=True)
    t.start()
    time.sleep(0.3)
    c.close()
    t.join(10)
    assert not t.is_alive() and result == [None]
    c.close()


def test_rebalance_hooks_are_called(cluster: Any) -> None:
    cluster.create_topic("hooks", partitions=4)
    assigned: list[list[int]] = []
    revoked: list[list[int]] = []
    a = consumer(cluster, "g_hooks", ["hooks"],
                 on_partitions_assigned=lambda ps: assigned.append(sorted(p.partition_id for p in ps)),
                 on_partitions_revoked=lambda ps: revoked.append(sorted(p.partition_id for p in ps)))
    with a:
        wait_for(lambda: assigned == [[0, 1, 2, 3]], what="assigned hook")
        with consumer(cluster, "g_hooks", ["hooks"]) as b:
            wait_for(lambda: len(b.assignment()) == 2, what="b gets 2")
            wait_for(lambda: len(revoked) == 1 and len(revoked[0]) == 2, what="revoked hook")


def test_asyncio_iteration(cluster: Any) -> None:
    cluster.create_topic("aio", partitions=2)
    produce(cluster, "aio", [b"x%d" % i for i in range(30)], partitions=2)

    async def main() -> list[bytes]:
        out: list[bytes] = []
        async with tubemq.aio.Consumer(cluster.master_address, group="g_aio", topics=["aio"],
                                       consume_from="earliest", iter_timeout_ms=1500, **FAST_CLIENT) as c:
            async for msg in c:
                out.append(msg.data)
            batch = await c.poll(0.1)
            assert batch is None
        return out

    got = asyncio.run(asyncio.wait_for(main(), 30))
    assert sorted(got) == sorted(b"x%d" % i for i in range(30))


def test_config_errors() -> None:
    with pytest.raises(ConfigError) as e:
        tubemq.Consumer("127.0.0.1:1", topics=["t"])
    assert e.value.field == "group"
    with pytest.raises(ConfigError) as e:
        tubemq.Consumer("127.0.0.1:1", group="g", topics=["t"], consume_from="middle")
    assert e.value.field == "consume_from"
    with pytest.raises(ConfigError):
        tubemq.Consumer("127.0.0.1:1", group="g", topics=["bad#topic"])
    with pytest.raises(ConfigError):
        tubemq.Consumer("127.0.0.1:1", group="g", topics=["t"], no_such_option=1)


def test_close_during_fetch_abandons_and_rolls_back(cluster: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from tubemq.net.connection import Connection
    from tubemq.protocol import broker_pb

    cluster.create_topic("slowf", partitions=1)
    produce(cluster, "slowf", [b"s%d" % i for i in range(10)])
    in_fetch = threading.Event()
    unregisters: list[int] = []
    orig = Connection.call

    async def slow_call(self: Any, service_type: int, method: int, body: bytes, *, timeout_ms: int) -> bytes:
        if method == 17:
            in_fetch.set()
            await asyncio.sleep(0.5)  # the getMessage is in flight while close() runs
        elif method == 15:
            req = broker_pb.RegisterRequestC2B.FromString(body)
            if req.opType == 32:
                unregisters.append(req.readStatus)
        return await orig(self, service_type, method, body, timeout_ms=timeout_ms)

    monkeypatch.setattr(Connection, "call", slow_call)
    c = consumer(cluster, "g_slowf", ["slowf"])
    assert in_fetch.wait(15)
    t0 = time.monotonic()
    c.close()
    assert time.monotonic() - t0 < 5
    assert unregisters == [1]  # the fetched-but-never-delivered batch is rolled back
    monkeypatch.setattr(Connection, "call", orig)
    with consumer(cluster, "g_slowf", ["slowf"]) as c2:
        got = drain(c2, 10)
        assert sorted(m.data for m in got) == sorted(b"s%d" % i for i in range(10))
