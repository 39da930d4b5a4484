"""Where a getMessage read looks and where it stops: files vs memory cache (broker ``_read``).

The capture replay covers file reads of the real broker (s2, s4, s5, s6c) and the empty-store 404 of
the cache side (s3); these tests pin the parts the captures do not reach, from the upstream source
(MessageStore / MsgMemStore.getMessages): the cache capacity, the read side chosen by qryPriorityId,
the 404s of the cache side, minLimitTime / currDataDlt semantics and the non-halving cache read. The
memory cache timer is off (``cache_flush_interval_ms`` 1 h) so where the data sits is decided by the
test alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tubemq.protocol import broker_pb
from tubemq.server import EmbeddedCluster
from tubemq.server.broker import _int32
from tubemq.server.storage import MEM_CACHE_MSG_COUNT, mem_cache_bytes
from tubemq.server.testing import FAST_CLIENT_TIMERS as FAST_TIMERS

from ._raw import RawClient

G = "reads_group"
MIB = 1024 * 1024


@pytest.fixture
def cl(tmp_path: Path) -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(data_dir=tmp_path / "d", **dict(FAST_TIMERS, cache_flush_interval_ms=3_600_000)) as c:
        c.create_topic("rt", partitions=3)
        yield c


@pytest.fixture
def c(cl: EmbeddedCluster) -> Iterator[RawClient]:
    with RawClient(cl.broker_address) as client:
        yield client


def fill(c: RawClient, partitions: list[int], topic: str = "rt", size: int = 10, msg_type: str | None = None) -> None:
    for p in partitions:
        assert c.send(topic, p, b"m" * size, msg_type=msg_type).success


def flush(cl: EmbeddedCluster, topic: str = "rt") -> None:
    """What the real broker's memory-cache flush timer does (memCacheFlushIntvl)."""
    cl._call(lambda: cl.server.stores.flush_caches(topic))


def on_loop(cl: EmbeddedCluster, fn: Callable[[Any], Any], topic: str = "rt") -> Any:
    """Run ``fn(store)`` on the server loop (store 0 of ``topic``)."""
    return cl._call(lambda: fn(cl.server.stores.get(topic, 0)))


def register(c: RawClient, partition: int, *, qry: int = -2, filters: list[str] | None = None) -> Any:
    req = broker_pb.RegisterRequestC2B(
        opType=31, clientId="c1", groupName=G, topicName="rt", partitionId=partition, readStatus=0, qryPriorityId=qry
    )
    req.authInfo.visitAuthorizedToken = -2
    req.filterCondStr.extend(filters or [])
    r = c.rpc(15, req, broker_pb.RegisterResponseB2C)
    assert r.success, r
    return r


def starts(c: RawClient, partition: int, limit: int = 50) -> list[tuple[int, int]]:
    """(currOffset, message count) of each read until the first 404."""
    out = []
    for _ in range(limit):
        m = c.fetch(G, "rt", partition)
        if not m.success:
            assert m.errMsg == "The request offset reached maxOffset!", m
            return out
        out.append((m.currOffset, len(m.messages)))
    raise AssertionError("no 404")


def test_file_reads_stop_at_half_of_the_entries_up_to_the_files_end(cl: EmbeddedCluster, c: RawClient) -> None:
    """Capture s6c's shape: 33 entries in the files, 8 in the cache; reads from 0 cover 17, 8, 4, 2, 1."""
    fill(c, [0] * 33)
    flush(cl)
    fill(c, [0] * 8)
    register(c, 0)
    m = c.fetch(G, "rt", 0, last_consumed=False)
    assert (m.currOffset, len(m.messages), m.maxOffset) == (0, 17, 41 * 28)  # unfiltered: the store's max
    got = starts(c, 0)  # the first of these commits the read above
    assert got[:5] == [(476, 8), (700, 4), (812, 2), (868, 1), (896, 1)]
    # then the cache: not halved, all 8 in one read
    assert got[5:] == [(924, 8)]


def test_sibling_entries_are_scanned_and_committed(cl: EmbeddedCluster, c: RawClient) -> None:
    fill(c, [1, 1, 1, 0, 1, 1, 1, 1])
    flush(cl)
    register(c, 0)
    # 8 entries -> the first read covers 4 (the p0 message is the 4th), the next 2 (no message):
    # an empty read is committed at once (DefaultOffsetManager.bookOffset)
    assert starts(c, 0) == [(0, 1), (112, 0), (168, 0), (196, 0)]
    r = c.rpc(
        18,
        broker_pb.CommitOffsetRequestC2B(clientId="c1", topicName="rt", partitionId=0, groupName=G),
        broker_pb.CommitOffsetResponseB2C,
    )
    assert r.currOffset == 224


def test_data_delta_counts_from_the_last_scanned_entry(cl: EmbeddedCluster, c: RawClient) -> None:
    fill(c, [0, 1, 0, 1])
    flush(cl)
    register(c, 0)
    sizes = [on_loop(cl, lambda s, o=o: s.entry_at(o))[2] for o in (0, 28, 56, 84)]
    m = c.fetch(G, "rt", 0)  # 4 entries -> scans 2 (one message of partition 0)
    assert len(m.messages) == 1 and m.currDataDlt == sizes[2] + sizes[3]
    m = c.fetch(G, "rt", 0)  # 2 -> 1: the partition-0 entry at 56
    assert m.currOffset == 56 and m.currDataDlt == sizes[3]


def test_cache_capacity_follows_the_topic_max_message_size(cl: EmbeddedCluster, c: RawClient) -> None:
    """Capture s6c: two ~1 MiB messages do not fit one cache of a 1 MiB topic; the second flushes it."""
    assert mem_cache_bytes(MIB) == 1583104 and mem_cache_bytes(100) == 1583104
    assert mem_cache_bytes(2 * MIB) == 2631680
    fill(c, [0, 0])
    fill(c, [1], size=MIB)
    assert on_loop(cl, lambda s: s.cache_start) == 0
    fill(c, [1], size=MIB)
    assert on_loop(cl, lambda s: s.cache_start) == 84
    # a filtered consumer reads the files only and reports their max (s6c: 924 of 1148)
    r = register(c, 2, filters=["typeA"])
    assert r.maxOffset == 112
    m = c.fetch(G, "rt", 2)
    assert m.success and m.maxOffset == 84 and m.requireSlow and not m.messages and m.currOffset == 0


def test_cache_message_count_limit(cl: EmbeddedCluster, c: RawClient) -> None:
    assert MEM_CACHE_MSG_COUNT == 5120
    fill(c, [0])  # the first send sets the topic's limits; lower the count for the test
    on_loop(cl, lambda s: s.set_cache_limits(mem_cache_bytes(MIB), 3))
    fill(c, [0, 0])
    assert on_loop(cl, lambda s: s.cache_start) == 0
    fill(c, [0])
    assert on_loop(cl, lambda s: s.cache_start) == 84


def test_files_only_404_reports_the_data_max_and_flushes(cl: EmbeddedCluster, c: RawClient) -> None:
    """Capture s4: minLimitTime of 'current offset is exceed max file offset' is the store's data max."""
    register(c, 0, filters=["typeA"])
    m = c.fetch(G, "rt", 0)  # empty store: the files-only side answers this 404 too, with 0
    assert (m.errCode, m.errMsg, m.minLimitTime) == (404, "current offset is exceed max file offset", 0)
    fill(c, [0, 1], msg_type="typeA")
    data_max = on_loop(cl, lambda s: s.data_max)
    m = c.fetch(G, "rt", 0, last_consumed=False)
    assert (m.errCode, m.errMsg, m.minLimitTime, m.currOffset, m.currDataDlt) == (
        404,
        "current offset is exceed max file offset",
        data_max,
        -1,
        -1,
    )
    m = c.fetch(G, "rt", 0)  # our stand-in for the real flush timer: the miss flushed the cache
    assert m.success and len(m.messages) == 1 and m.requireSlow and m.maxOffset == 56
    assert _int32(2**31) == -(2**31) and _int32(4216295) == 4216295


@pytest.mark.parametrize(
    ("qry", "text"),
    [
        (101, "current offset is exceed max file offset"),  # x // 100 == 1: files only
        (201, "Can't found Message by index in cache"),  # 2: only the cache being flushed
    ],
)
def test_qry_priority_id_picks_the_side(cl: EmbeddedCluster, c: RawClient, qry: int, text: str) -> None:
    fill(c, [0, 0])
    register(c, 0, qry=qry)
    m = c.fetch(G, "rt", 0)
    assert (m.errCode, m.errMsg) == (404, text)
    if qry == 101:  # the files-only miss flushed the cache: the next read is a file read
        m = c.fetch(G, "rt", 0)
        assert (m.currOffset, len(m.messages), m.maxOffset) == (0, 1, 56)
    else:  # the read booked nothing
        assert c.fetch(G, "rt", 0).errMsg == text
        flush(cl)
        m = c.fetch(G, "rt", 0)
        assert (m.currOffset, len(m.messages), m.maxOffset) == (0, 1, 56)


def test_real_cache_reads_do_not_halve(cl: EmbeddedCluster, c: RawClient) -> None:
    fill(c, [0] * 7 + [1])
    register(c, 0)
    m = c.fetch(G, "rt", 0)  # scans to the cache's end (the sibling entry too), no halving
    assert (m.currOffset, len(m.messages), m.maxOffset) == (0, 7, 224)
    # currDataDlt of a cache read: from the end of the last RETURNED message
    assert m.currDataDlt == on_loop(cl, lambda s: s.entry_at(196))[2]
    assert c.fetch(G, "rt", 0).errMsg == "The request offset reached maxOffset!"
    # the cache holds nothing for partition 0 after 224: 404, and the skipped entries are committed
    fill(c, [1, 2])
    m = c.fetch(G, "rt", 0)
    assert (m.errCode, m.errMsg, m.currOffset) == (404, "Can't found Message by index!", -1)
    assert m.minLimitTime == on_loop(cl, lambda s: s.data_max)
    assert c.fetch(G, "rt", 0).errMsg == "The request offset reached maxOffset!"


def test_real_cache_read_checks_filter_keys_of_any_partition(cl: EmbeddedCluster, c: RawClient) -> None:
    fill(c, [1], msg_type="typeA")
    fill(c, [0], msg_type="typeB")
    register(c, 0, qry=303, filters=["typeA"])  # 303 % 100 == 3: a filtered consumer may read the cache
    m = c.fetch(G, "rt", 0)  # a typeA message exists (on partition 1): the read happens, finds nothing
    assert m.success and not m.messages and m.currOffset == 0 and not m.requireSlow and m.maxOffset == 56
    m = c.fetch(G, "rt", 0)
    assert m.errMsg == "The request offset reached maxOffset!"  # the empty read was committed


def test_cache_read_stops_at_the_transfer_size(cl: EmbeddedCluster, c: RawClient) -> None:
    """MsgMemStore.getMessages stops once the records read reach the transfer size (crossing one in)."""
    fill(c, [0, 0, 0], size=300 * 1024)
    register(c, 0)
    m = c.fetch(G, "rt", 0)
    assert (m.currOffset, len(m.messages), m.maxOffset) == (0, 2, 84)
    m = c.fetch(G, "rt", 0)
    assert (m.currOffset, len(m.messages)) == (56, 1)
