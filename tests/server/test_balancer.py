"""Unit tests of the server-side balancing rules (docs/PROTOCOL.md §5.4) without sockets."""

from __future__ import annotations

import itertools
import random

import pytest

from tubemq.codec import Partition
from tubemq.protocol.constants import EventType
from tubemq.server.master.balancer import (
    MAX_BALANCE_DELAY_ROUNDS,
    ConsumerEvent,
    ServerBalancer,
    assign,
    diff_events,
)


def parts(n: int, topic: str = "t", stores: int = 1) -> list[Partition]:
    per = n // stores
    return [Partition(1, "127.0.0.1", 8123, topic, s * 10000 + i) for s in range(stores) for i in range(per)]


def keys(ps: list[Partition]) -> set[str]:
    return {p.key for p in ps}


@pytest.mark.parametrize("n,c", [(3, 1), (3, 2), (3, 3), (7, 2), (7, 3), (2, 3), (10, 4), (0, 2)])
def test_assign_covers_each_partition_once_with_balanced_counts(n: int, c: int) -> None:
    ps = parts(n)
    consumers = [f"c{i}" for i in range(c)]
    target = assign(ps, consumers, {})
    all_keys = [p.key for cid in target for p in target[cid]]
    assert sorted(all_keys) == sorted(p.key for p in ps)
    counts = sorted(len(v) for v in target.values())
    assert counts[-1] - counts[0] <= 1
    assert set(target) == set(consumers)


def test_assign_keeps_existing_ownership_when_counts_allow() -> None:
    ps = parts(6)
    current = {"a": ps[:3], "b": ps[3:]}
    target = assign(ps, ["a", "b", "c"], current)
    assert keys(target["a"]) <= keys(ps[:3])
    assert keys(target["b"]) <= keys(ps[3:])
    assert len(target["c"]) == 2
    # only the partitions c needed moved
    moved = 6 - len(keys(target["a"]) & keys(ps[:3])) - len(keys(target["b"]) & keys(ps[3:]))
    assert moved == 2


def test_assign_is_deterministic_and_ignores_unknown_partitions() -> None:
    ps = parts(7)
    ghost = Partition(1, "h", 1, "gone", 0)
    current = {"b": [ghost, ps[0]]}
    t1 = assign(ps, ["b", "a"], current)
    t2 = assign(list(reversed(ps)), ["a", "b"], current)
    assert t1 == t2
    assert ghost.key not in keys(t1["b"])
    assert ps[0].key in keys(t1["b"])


def test_assign_larger_holder_gets_the_extra_slot() -> None:
    ps = parts(3)
    target = assign(ps, ["a", "b"], {"b": ps})
    assert len(target["b"]) == 2 and len(target["a"]) == 1


def test_diff_event_types() -> None:
    ps = parts(4)
    assert [e.op_type for e in diff_events(1, ps[:2], [])] == [EventType.ONLY_CONNECT]
    assert [e.op_type for e in diff_events(1, [], ps[:2])] == [EventType.ONLY_DISCONNECT]
    evs = diff_events(5, ps[1:3], ps[:2])
    assert [e.op_type for e in evs] == [EventType.DISCONNECT, EventType.CONNECT]
    assert [keys(list(e.partitions)) for e in evs] == [{ps[0].key}, {ps[2].key}]
    assert all(e.rebalance_id == 5 for e in evs)
    assert diff_events(1, ps[:2], ps[:2]) == []


def test_subscribe_info_strings_have_explicit_ports() -> None:
    ev = ConsumerEvent(3, EventType.ONLY_CONNECT, (Partition(1, "127.0.0.1", 8123, "t", 2),))
    assert ev.subscribe_infos("cid", "g") == ["cid@g#1:127.0.0.1:8123#t:2"]


def test_rebalance_id_is_master_wide_and_counts_every_round() -> None:
    b = ServerBalancer()
    assert b.run_round({}) == 1
    assert b.run_round({"g": (["a"], parts(3))}) == 2
    assert b.run_round({"other": ([], [])}) == 3


def test_event_delivered_once_and_ack_removes_head() -> None:
    b = ServerBalancer()
    ps = parts(3)
    rid = b.run_round({"g": (["a"], ps)})
    ev = b.next_event(["a"], "a")
    assert ev is not None and ev.op_type == EventType.ONLY_CONNECT and ev.rebalance_id == rid
    assert b.next_event(["a"], "a") is None  # delivered once
    assert b.run_round({"g": (["a"], ps)}) == rid + 1  # group skipped: unfinished event
    assert len(b.pending_events("a")) == 1
    assert b.ack_event(["a"], "a") is ev
    assert not b.has_events("a")


def test_barrier_holds_connect_until_disconnect_acked() -> None:
    """Capture s3: A gets ONLY_DISCONNECT, B's ONLY_CONNECT waits for A's report."""
    b = ServerBalancer()
    ps = parts(3)
    members = ["a", "b"]
    b.set_record("a", ps)
    rid = b.run_round({"g": (members, ps)})
    assert [e.op_type for e in b.pending_events("a")] == [EventType.ONLY_DISCONNECT]
    assert [e.op_type for e in b.pending_events("b")] == [EventType.ONLY_CONNECT]
    assert b.next_event(members, "b") is None  # barrier
    ev_a = b.next_event(members, "a")
    assert ev_a is not None and ev_a.op_type == EventType.ONLY_DISCONNECT
    assert b.next_event(members, "b") is None  # still pending disconnect
    b.ack_event(members, "a")
    ev_b = b.next_event(members, "b")
    assert ev_b is not None and ev_b.op_type == EventType.ONLY_CONNECT and ev_b.rebalance_id == rid
    assert keys(list(ev_a.partitions)) == keys(list(ev_b.partitions))


def test_ack_of_other_member_during_barrier_removes_nothing() -> None:
    b = ServerBalancer()
    ps = parts(3)
    b.set_record("a", ps)
    b.run_round({"g": (["a", "b"], ps)})
    assert b.ack_event(["a", "b"], "b") is None
    assert len(b.pending_events("b")) == 1


def test_remove_consumer_drops_record_and_events() -> None:
    b = ServerBalancer()
    ps = parts(3)
    b.set_record("a", ps)
    b.run_round({"g": (["a", "b"], ps)})
    b.remove_consumer("a")
    assert b.record("a") == [] and not b.has_events("a")
    # b's pending connect is now deliverable: no disconnect left in the group
    assert b.next_event(["b"], "b") is not None


def test_unfinished_events_dropped_after_max_rounds() -> None:
    b = ServerBalancer()
    ps = parts(2)
    b.run_round({"g": (["a"], ps)})
    for _ in range(MAX_BALANCE_DELAY_ROUNDS):
        b.run_round({"g": (["a"], ps)})
        assert b.has_events("a")
    b.run_round({"g": (["a"], ps)})
    # dropped, then a fresh balance of the still-empty record queues a new connect
    evs = b.pending_events("a")
    assert len(evs) == 1 and evs[0].rebalance_id == b.rebalance_id


def test_set_record_reports_change() -> None:
    b = ServerBalancer()
    ps = parts(2)
    assert b.set_record("a", ps)
    assert not b.set_record("a", list(reversed(ps)))
    assert b.set_record("a", ps[:1])
    assert keys(b.record("a")) == {ps[0].key}


def test_apply_event_updates_record() -> None:
    b = ServerBalancer()
    ps = parts(3)
    b.apply_event("a", ConsumerEvent(1, EventType.ONLY_CONNECT, tuple(ps)))
    b.apply_event("a", ConsumerEvent(2, EventType.DISCONNECT, (ps[0],)))
    assert keys(b.record("a")) == {ps[1].key, ps[2].key}


class _SimClient:
    """A consumer that processes each event like the Java client: ack + full report."""

    def __init__(self, cid: str) -> None:
        self.cid = cid
        self.held: dict[str, Partition] = {}
        self.done: ConsumerEvent | None = None


@pytest.mark.parametrize("n_parts,n_consumers", [(3, 2), (3, 3), (7, 2), (7, 3)])
def test_simulated_group_never_double_owns(n_parts: int, n_consumers: int) -> None:
    """Random interleavings of rounds and heartbeats: no partition is ever held twice."""
    rng = random.Random(n_parts * 31 + n_consumers)
    ps = parts(n_parts)
    b = ServerBalancer()
    clients: dict[str, _SimClient] = {}
    names = iter(f"c{i}" for i in itertools.count())

    def heartbeat(c: _SimClient, members: list[str]) -> None:
        if c.done is not None:
            b.set_record(c.cid, c.held.values())
            b.ack_event(members, c.cid)
            c.done = None
        ev = b.next_event(members, c.cid)
        if ev is None:
            return
        for p in ev.partitions:
            if ev.is_disconnect:
                c.held.pop(p.key, None)
            else:
                c.held[p.key] = p
        c.done = ev

    def check() -> None:
        seen: dict[str, str] = {}
        for c in clients.values():
            for k in c.held:
                assert k not in seen, f"{k} held by {seen[k]} and {c.cid}"
                seen[k] = c.cid

    for step in range(400):
        if len(clients) < n_consumers and rng.random() < 0.05:
            cid = next(names)
            clients[cid] = _SimClient(cid)
        elif len(clients) > 1 and rng.random() < 0.01:
            gone = rng.choice(sorted(clients))
            del clients[gone]  # leaves without releasing: broker expiry would free its partitions
            b.remove_consumer(gone)
        members = sorted(clients)
        if step % 5 == 0:
            b.run_round({"g": (members, ps)})
        for cid in rng.sample(members, len(members)):
            heartbeat(clients[cid], members)
        check()
    # quiesce: a few rounds and heartbeats without membership changes -> fully balanced
    members = sorted(clients)
    for _ in range(30):
        b.run_round({"g": (members, ps)})
        for cid in members:
            heartbeat(clients[cid], members)
            heartbeat(clients[cid], members)
        check()
    held = [k for c in clients.values() for k in c.held]
    assert sorted(held) == sorted(p.key for p in ps)
    counts = [len(c.held) for c in clients.values()]
    assert max(counts) - min(counts) <= 1


def test_partial_round_keeps_other_groups_unfinished_counts() -> None:
    """A new group balanced at once (a round over that group only) takes the next rebalanceId and
    leaves the unfinished-round count of every other group alone."""
    b = ServerBalancer()
    ps, qs = parts(2), parts(2, topic="u")
    b.run_round({"g": (["a"], ps)})
    for _ in range(MAX_BALANCE_DELAY_ROUNDS - 1):
        b.run_round({"g": (["a"], ps)})  # a holds its unacknowledged connect: g is unfinished
    for _ in range(3):
        rid = b.run_round({"h": (["x"], qs)}, partial=True)
    assert rid == b.rebalance_id == MAX_BALANCE_DELAY_ROUNDS + 3
    first = b.pending_events("a")[0]
    b.run_round({"g": (["a"], ps), "h": (["x"], qs)})  # the 10th unfinished round of g: still kept
    assert b.pending_events("a")[0] is first
    b.run_round({"g": (["a"], ps), "h": (["x"], qs)})  # then dropped and queued anew
    assert b.pending_events("a")[0] is not first
