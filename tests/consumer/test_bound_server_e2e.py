"""Server-side bound consumption end to end: Consumer(bound_offsets=..., session_key=..., source_count=...)
against the embedded cluster over real TCP. A group of consumers starts from caller-given offsets,
agreed through the master; a later session (new key) resets the group again."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import pytest

import tubemq
from tubemq.errors import ConfigError, InconsistentGroupError
from tubemq.protocol.constants import EventType

from ._produce import send_raw
from .conftest import FAST_CLIENT, quiet
from .test_wire_shapes import recorder, shape_of_msg

__all__ = ["recorder"]  # the fixture, imported for the wire tests

TOPIC = "bsrv"
PARTS = 4


def produce(cluster: Any, tag: str, n: int, parts: int = PARTS) -> dict[int, list[tuple[bytes, int]]]:
    """``n`` messages round-robin over the partitions: {partition id: [(body, index offset)]}."""
    bodies = [b"%s-%04d" % (tag.encode(), i) for i in range(n)]
    rsps = send_raw(cluster.broker_address, TOPIC, ((i % parts, b, None, None) for i, b in enumerate(bodies)))
    out: dict[int, list[tuple[bytes, int]]] = {}
    for i, (body, r) in enumerate(zip(bodies, rsps, strict=True)):
        out.setdefault(i % parts, []).append((body, r.append_offset))
    return out


@contextlib.contextmanager
def bound_group(cluster: Any, offsets: dict[Any, int], session: str, count: int = 2) -> Iterator[list[Any]]:
    """``count`` consumers of group g_bsrv, each passing the same offsets (as Java jobs do)."""
    opts = {**FAST_CLIENT, "bound_offsets": offsets, "session_key": session, "source_count": count}
    consumers: list[Any] = []
    try:
        for _ in range(count):
            consumers.append(tubemq.Consumer(cluster.master_address, group="g_bsrv", topics=[TOPIC], **opts))
        yield consumers
    finally:
        for c in consumers:
            c.close()


def drain_all(consumers: list[Any], count: int, timeout: float = 20.0) -> list[Any]:
    """Poll every consumer until ``count`` messages arrived in total (fail after ``timeout``)."""
    out: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(out) < count:
        if time.monotonic() > deadline:
            pytest.fail(f"got {len(out)} of {count} messages within {timeout} s")
        for c in consumers:
            batch = c.poll(0.05)
            if batch is not None:
                out.extend(batch.messages)
                c.confirm(batch)
    return out


def test_group_starts_at_the_bound_offsets_and_a_new_session_resets_again(cluster: Any) -> None:
    cluster.create_topic(TOPIC, partitions=PARTS)  # one store: partitions share the index offsets
    first = produce(cluster, "a", 400)
    broker = cluster.server.nodes[0].broker_id
    cut = {pid: 10 * (pid + 1) for pid in range(PARTS)}  # start at the 10th, 20th, ... message
    offsets: dict[Any, int] = {f"{broker}:{TOPIC}:{pid}": first[pid][k][1] for pid, k in cut.items()}
    expected = sorted(b for pid, k in cut.items() for b, _ in first[pid][k:])
    # the default consume_from ("latest") would skip the backlog: the bound offsets override it
    with bound_group(cluster, offsets, "run-1") as group:
        got = drain_all(group, len(expected))
        got += [m for c in group for m in quiet(c, 0.3)]
        assert sorted(m.data for m in got) == expected  # exactly from the offsets, nothing twice
        assert all(c.assignment() for c in group)  # both members consume
        # a member of another run while this one is alive: refused by the master (427)
        with pytest.raises(InconsistentGroupError) as err:
            tubemq.Consumer(cluster.master_address, group="g_bsrv", topics=[TOPIC], **FAST_CLIENT,
                            bound_offsets=offsets, session_key="run-2", source_count=2)
        assert err.value.code == 427 and "sessionKey is inconsistency" in str(err.value)
    # the next run rewinds partitions 0 and 1 (keys as (broker, topic, id) tuples this time) and
    # names neither 2 nor 3: those continue from the group's committed offsets (new data only)
    second = produce(cluster, "b", 40)
    rewind = {(broker, TOPIC, 0): first[0][95][1], (broker, TOPIC, 1): first[1][90][1]}
    expected2 = sorted([b for b, _ in first[0][95:]] + [b for b, _ in first[1][90:]]
                       + [b for pid in range(PARTS) for b, _ in second[pid]])
    with bound_group(cluster, rewind, "run-2") as group:
        got = drain_all(group, len(expected2))
        got += [m for c in group for m in quiet(c, 0.3)]
        assert sorted(m.data for m in got) == expected2
    assert {r["partition_id"] for r in cluster.group_offsets("g_bsrv")} == set(range(PARTS))


def test_single_member_bound_session(cluster: Any) -> None:
    """source_count=1, offsets given as Partition keys with spaces and as select_big=False."""
    cluster.create_topic(TOPIC, partitions=PARTS)
    data = produce(cluster, "c", 80)
    broker = cluster.server.nodes[0].broker_id
    offsets = {f" {broker} : {TOPIC} : {pid} ": data[pid][15][1] for pid in range(PARTS)}
    expected = sorted(b for pid in range(PARTS) for b, _ in data[pid][15:])
    with tubemq.Consumer(cluster.master_address, group="g_one", topics=[TOPIC], **FAST_CLIENT,
                         bound_offsets=offsets, session_key="only", source_count=1, select_big=False) as c:
        assert c.config.bound_offsets == {f"{broker}:{TOPIC}:{pid}": data[pid][15][1] for pid in range(PARTS)}
        got = drain_all([c], len(expected))
        assert sorted(m.data for m in got) == expected
        assert not quiet(c, 0.3)


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"bound_offsets": {"1:bsrv:0": 0}, "source_count": 1}, "session_key"),
        ({"bound_offsets": {"1:bsrv:0": 0}, "session_key": "s"}, "source_count"),
        ({"bound_offsets": {"1:other:0": 0}, "session_key": "s", "source_count": 1}, "bound_offsets"),
        ({"bound_offsets": {"1:bsrv:0": -1}, "session_key": "s", "source_count": 1}, "bound_offsets"),
        ({"bound_offsets": {"bsrv:0": 0}, "session_key": "s", "source_count": 1}, "bound_offsets"),
        ({"bound_offsets": {"1:bsrv:0,1": 0}, "session_key": "s", "source_count": 1}, "bound_offsets"),
        ({"bound_offsets": [("1:bsrv:0", 0)], "session_key": "s", "source_count": 1}, "bound_offsets"),
        ({"bound_offsets": {}, "session_key": "s", "source_count": 1, "select_big": 1}, "select_big"),
    ],
)
def test_bad_bound_options_are_typed(options: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as err:
        tubemq.Consumer("127.0.0.1:1", group="g", topics=[TOPIC], **options)
    assert err.value.field == field


def test_wire_fields_as_the_java_client_sends_them(cluster: Any, recorder: list[tuple[str, Any]]) -> None:
    """BaseMessageConsumer.createMasterRegisterRequest with requireBound: the five bound fields after
    the usual ones; createBrokerRegisterRequest: currOffset on the first connect only. No capture
    holds a bound run, so this follows the Java source (README: UNCERTAIN where inferred)."""
    cluster.create_topic(TOPIC, partitions=2)
    data = produce(cluster, "w", 20, parts=2)
    broker = cluster.server.nodes[0].broker_id
    offsets = {f"{broker}:{TOPIC}:0": data[0][3][1], f"{broker}:{TOPIC}:1": data[1][5][1]}
    with tubemq.Consumer(cluster.master_address, group="g_wire", topics=[TOPIC], **FAST_CLIENT,
                         bound_offsets=offsets, session_key="wire", source_count=1) as c:
        drain_all([c], 20 - 3 - 5)
    reg = next(req for name, req in recorder if name == "CONSUMER_REGISTER")
    assert shape_of_msg(reg) == {
        "clientId", "groupName", "hostName", "topicList", "requireBound", "sessionTime", "sessionKey",
        "totalCount", "requiredPartition", "notAllocated", "selectBig", "groupFlowCheckId",
        "defFlowCheckId", "qryPriorityId", "jdkVersion",
    }
    assert (reg.requireBound, reg.sessionKey, reg.totalCount, reg.selectBig, reg.notAllocated) == (
        True, "wire", 1, True, True)
    assert reg.requiredPartition == ",".join(f"{k}={v}" for k, v in offsets.items())
    regs = [req for name, req in recorder if name == "BROKER_CONSUMER_REGISTER" and req.opType == 31]
    assert {f"{broker}:{r.topicName}:{r.partitionId}": r.currOffset for r in regs} == offsets
    assert all(r.readStatus == 1 for r in regs)  # consume_from "latest": first registration from max


def test_unbound_register_has_no_bound_fields(cluster: Any, recorder: list[tuple[str, Any]]) -> None:
    cluster.create_topic(TOPIC, partitions=1)
    with tubemq.Consumer(cluster.master_address, group="g_plain", topics=[TOPIC], **FAST_CLIENT) as c:
        assert c.client_id
    reg = next(req for name, req in recorder if name == "CONSUMER_REGISTER")
    assert reg.HasField("requireBound") and not reg.requireBound
    assert not any(reg.HasField(f) for f in ("sessionKey", "totalCount", "requiredPartition", "notAllocated",
                                             "selectBig"))


def _core_with_answers(answers: list[Any]) -> Any:
    """A ConsumerCore (not started) whose master calls return ``answers`` in order."""
    from tubemq.config import ConsumerConfig
    from tubemq.consumer.core import ConsumerCore

    cfg = ConsumerConfig.build("127.0.0.1:1", "g", [TOPIC], bound_offsets={f"1:{TOPIC}:0": 280},
                               session_key="s", source_count=2)
    core = ConsumerCore(cfg)

    async def call_master(method: int, request: Any, response_cls: Any) -> Any:
        return answers.pop(0)

    core.session.call_master = call_master  # type: ignore[method-assign]
    return core


def _hb_answer(not_allocated: bool, with_event: bool) -> Any:
    from tubemq.protocol import master_pb

    rsp = master_pb.HeartResponseM2C(success=True, errCode=200, errMsg="OK!", notAllocated=not_allocated)
    if with_event:
        rsp.event.rebalanceId = 3
        rsp.event.opType = EventType.ONLY_CONNECT
        rsp.event.subscribeInfo.append(f"c@g#1:127.0.0.1:8123#{TOPIC}:0")
    return rsp


def test_offsets_survive_an_event_that_arrives_with_the_allocated_flag() -> None:
    """Another member acknowledged its reset event before this member's heartbeat fetched its own:
    the answer carrying our reset event already says notAllocated=false. The offsets are still used
    (Java would drop them: it reads the flag when it registers)."""
    import asyncio

    from tubemq.codec import Partition

    part = Partition(1, "127.0.0.1", 8123, TOPIC, 0)
    core = _core_with_answers([_hb_answer(True, False), _hb_answer(False, True)])
    asyncio.run(core.session._heartbeat_once())
    asyncio.run(core.session._heartbeat_once())
    slot = core.table.add(part)
    assert not core.session.not_allocated and core._bound_offset(slot) == 280
    # once a connect event was processed, later registrations carry no offset (Java isFirst)
    core.worker.processed_by_type["only_connect"] = 1
    assert core._bound_offset(slot) is None
    # the group was allocated before the first event arrived: a later (normal) connect carries none
    late = _core_with_answers([_hb_answer(False, False), _hb_answer(False, True)])
    asyncio.run(late.session._heartbeat_once())
    asyncio.run(late.session._heartbeat_once())
    assert late._bound_offset(late.table.add(part)) is None
