"""Broker answers over real TCP: validation order and texts, offsets, ownership, filters (s2-s6c).

Fresh messages sit in the broker's memory cache, where reads return everything of the partition at
once; after ``flush`` they are in the files, where a read scans half of the loaded index entries
(server/broker/__init__.py ``_read``). The cache timer is off here (``cache_flush_interval_ms`` 1 h), so each
test decides where its data sits.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tubemq import codec
from tubemq.errors import ConfigError
from tubemq.protocol import broker_pb
from tubemq.server import EmbeddedCluster, ServerConfig
from tubemq.server.testing import FAST_CLIENT_TIMERS as FAST_SERVER

from ._raw import RawClient

MIB = 1024 * 1024
#: the memory cache timer off: data moves to the files only when a test calls ``flush``
NO_CACHE_TIMER = {"cache_flush_interval_ms": 3_600_000}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(data_dir=tmp_path / "tubemq-data", **FAST_SERVER, **NO_CACHE_TIMER) as cl:
        yield cl


def flush(cl: EmbeddedCluster, topic: str = "cap_err") -> None:
    """Move the topic's memory cache into the files (the real broker's memCacheFlushIntvl timer)."""
    cl._call(lambda: cl.server.stores.flush_caches(topic))


@pytest.fixture
def c(cluster: Any) -> Any:
    cluster.create_topic("cap_err", partitions=3)
    cluster.create_topic("cap_big", partitions=1, max_msg_size=2 * MIB)
    with RawClient(cluster.broker_address) as client:
        yield client


def send_req(**kw: Any) -> broker_pb.SendMessageRequestP2B:
    base: dict[str, Any] = dict(clientId="p1", topicName="cap_err", partitionId=0, data=b"x", flag=0, checkSum=-1,
                                sentAddr=2130706433)
    base.update(kw)
    req = broker_pb.SendMessageRequestP2B(**base)
    req.authInfo.visitAuthorizedToken = -2
    return req


def send(c: RawClient, **kw: Any) -> Any:
    return c.rpc(13, send_req(**kw), broker_pb.SendMessageResponseB2P, service_type=3)


# ---------------------------------------------------------------------------------------------------
# send (s6a)


def test_send_success_fields(c: RawClient) -> None:
    r = send(c, data=b"baseline payload")
    assert r.success and r.errCode == 200
    assert r.errMsg == str(r.messageId) and r.messageId > 0
    assert r.HasField("requireAuth") and not r.requireAuth
    assert abs(r.appendTime - time.time() * 1000) < 60000
    assert r.appendOffset == 0
    r2 = send(c, partitionId=2)
    assert r2.appendOffset == 28 and r2.messageId > r.messageId


@pytest.mark.parametrize(
    ("kw", "code", "text"),
    [
        ({"topicName": "no_such_topic_cap"}, 403, "topicName no_such_topic_cap not existed, please check your configure"),
        ({"topicName": "bad#topic"}, 403, "topicName bad#topic not existed, please check your configure"),
        ({"topicName": "   "}, 400, "Request miss necessary topicName data!"),
        ({"topicName": "t" * 65}, 400, "topicName's length over max value, allowed max length is 64"),
        ({"topicName": "__offset_history__"}, 403,
         "topicName __offset_history__ does not allow producers to send data!"),
        ({"partitionId": 3}, 403, "partitionId cap_err-3 not existed, please check your configure"),
        ({"partitionId": 7}, 403, "partitionId cap_err-7 not existed, please check your configure"),
        ({"partitionId": 10003}, 403, "partitionId cap_err-10003 not existed, please check your configure"),
        ({"partitionId": -1}, 403, "partitionId cap_err--1 not existed, please check your configure"),
        ({"data": b""}, 400, "data length is zero!"),
        ({"clientId": "  "}, 400, "Request miss necessary clientId data!"),
        ({"clientId": "c" * 1025}, 400, "clientId's length over max value, allowed max length is 1024"),
        ({"data": b"checksum test", "checkSum": 12345}, 403,
         "Checksum msg data failure: 12345 of cap_err not equal to the data's checksum of 1198099451"),
    ],
)
def test_send_errors(c: RawClient, kw: dict[str, Any], code: int, text: str) -> None:
    r = send(c, **kw)
    assert (r.success, r.errCode, r.errMsg) == (False, code, text)
    for f in ("requireAuth", "messageId", "appendTime", "appendOffset"):
        assert not r.HasField(f)


def test_send_validation_order(c: RawClient) -> None:
    # clientId is checked before the topic, the topic before data and checksum
    r = send(c, clientId=" ", topicName="nope", data=b"")
    assert r.errMsg == "Request miss necessary clientId data!"
    r = send(c, topicName="nope", data=b"")
    assert r.errCode == 403
    r = send(c, data=b"", checkSum=5)
    assert r.errMsg == "data length is zero!"


def test_send_accepts_quirks(c: RawClient) -> None:
    assert send(c, data=b"checksum test", checkSum=1198099451).success
    assert send(c, topicName=" cap_err ").success  # trimmed
    assert send(c, flag=1, data=b"no header but flag 1").success
    assert send(c, msgType="typeZ", data=b"type without attr").success
    r = c.rpc(13, send_req(), broker_pb.SendMessageResponseB2P, service_type=2, protocol_ver=2)
    assert r.success


def test_partition_10000_goes_to_a_separate_store(c: RawClient) -> None:
    for _ in range(3):
        send(c, partitionId=0)
    r = send(c, partitionId=10000)
    assert r.success and r.appendOffset == 0  # store index 1 starts at 0
    assert send(c, partitionId=0).appendOffset == 84


def test_size_limit_is_topic_max_plus_10240(c: RawClient) -> None:
    ok = MIB + 10240
    assert send(c, data=b"Z" * ok).success
    r = send(c, data=b"Z" * (ok + 1))
    assert r.errMsg == f"data length over max length, allowed max length is {ok}, data length is {ok + 1}"
    assert send(c, topicName="cap_big", data=b"Z" * (ok + 1)).success
    big = 2 * MIB + 10240
    r = send(c, topicName="cap_big", data=b"Z" * (big + 1))
    assert (r.errCode, r.errMsg) == (400, f"data length over max length, allowed max length is {big}, "
                                          f"data length is {big + 1}")


def test_write_service_unavailable(cluster: Any, c: RawClient) -> None:
    cluster._call(setattr, cluster.server.broker, "write_available", False)
    r = send(c)
    assert (r.errCode, r.errMsg) == (503, "Write StoreService temporary unavailable!")
    cluster._call(setattr, cluster.server.broker, "write_available", True)
    assert send(c).success


# ---------------------------------------------------------------------------------------------------
# consumer errors and ownership (s6c)

G = "cap_err_bgroup"
C1 = "cap_err_bgroup_c1"
C2 = "cap_err_bgroup_c2"


def test_unregistered_consumer_answers(c: RawClient) -> None:
    m = c.fetch(G, "cap_err", 0, C1, last_consumed=False)
    assert (m.success, m.errCode, m.errMsg) == (False, 411, f"UnRegistered Consumer:{C1}, you have to register firstly!")
    assert (m.currOffset, m.minLimitTime, m.escFlowCtrl, m.currDataDlt) == (-1, 0, False, -1)
    assert not m.HasField("maxOffset") and not m.HasField("requireSlow")
    r = c.commit(G, "cap_err", 0, C1)
    assert (r.errCode, r.errMsg, r.currOffset) == (401, "The partition not registered by consumers", -1)
    u = c.register(G, "cap_err", 0, C1, op=32)
    assert (u.errCode, u.errMsg, u.currOffset) == (
        411, f"UnRegistered Consumer {C1}, you have to register firstly!", -1)
    hb = c.heartbeat(G, ["1:127.0.0.1:8123#cap_err:0"], C1)
    assert (hb.success, hb.errCode, hb.errMsg, hb.hasPartFailure) == (True, 200, "OK!", True)
    assert list(hb.failureInfo) == ["411:1:127.0.0.1:8123#cap_err:0"] and not hb.requireAuth
    hb = c.heartbeat(G, [], C1)
    assert hb.HasField("hasPartFailure") and not hb.hasPartFailure and not hb.failureInfo


def test_register_errors_and_stale_record(c: RawClient) -> None:
    r = c.register(G, "cap_err", 0, C1, op=33)
    assert (r.errCode, r.errMsg, r.currOffset) == (400, "Invalid request:33", -1)
    r = c.register(G, "no_such_topic_cap", 0, C1)
    assert (r.errCode, r.errMsg) == (403, "topicName no_such_topic_cap not existed, please check your configure")
    r = c.register(G, "cap_err", 5, C1)
    assert (r.errCode, r.errMsg, r.currOffset) == (
        500, "Register broker failure!, exception is Wrong partition value 5,valid partitions in (0,2)", -1)
    m = c.fetch(G, "cap_err", 5, C1, last_consumed=False)
    assert (m.errCode, m.errMsg) == (500, "Get the store of topic cap_err in partition 5 failure!")
    u = c.register(G, "cap_err", 5, C1, op=32)
    assert (u.success, u.currOffset) == (True, -1)
    r = c.register(" ", "cap_err", 0, C1)
    assert (r.errCode, r.errMsg) == (400, "Request miss necessary groupName data!")
    m = c.fetch(" ", "cap_err", 0, C1)
    assert (m.errCode, m.errMsg) == (400, "Request miss necessary groupName data!")
    m = c.fetch(G, "no_such_topic_cap", 0, C1)
    assert m.errCode == 403


def test_ownership_410_412_401(c: RawClient) -> None:
    for i in range(3):
        send(c, data=b"seed %d" % i)
    r = c.register(G, "cap_err", 0, C1)
    assert r.success and (r.currOffset, r.maxOffset) == (0, 84)
    r = c.register(G, "cap_err", 0, C2)
    assert (r.errCode, r.currOffset) == (410, -1)
    assert r.errMsg == f"[Duplicated Register] Partition 1#{G}:cap_err:0 has been registered by {C1}"
    m = c.fetch(G, "cap_err", 0, C2)
    assert m.errCode == 412
    assert m.errMsg == (f"[Duplicated Request] Partition={G}:cap_err:0 of Broker=1 has been consumed by {C1};"
                        f"Current consumer {C2}")
    r = c.commit(G, "cap_err", 0, C2)
    assert (r.errCode, r.errMsg) == (401, f"The partition has been registered by other consumer: {C1}")
    u = c.register(G, "cap_err", 0, C2, op=32)
    assert u.errCode == 412
    assert u.errMsg == (f"[Duplicated Request]Partition {G}:cap_err:0 has been consumed by {C1};"
                        f"Current consumer {C2}, broker=127.0.0.1")
    hb = c.heartbeat(G, ["1:127.0.0.1:8123#cap_err:0", "1:127.0.0.1:8123#cap_err:1"], C2)
    assert list(hb.failureInfo) == ["412:1:127.0.0.1:8123#cap_err:0", "411:1:127.0.0.1:8123#cap_err:1"]
    # a different group consumes independently
    assert c.register("other_group", "cap_err", 0, C2).success
    # hand-over: after c1 leaves, c2 resumes at the group's committed offset
    assert drain(c, G, "cap_err", 0, C1) == [b"seed 0", b"seed 1", b"seed 2"]
    assert c.commit(G, "cap_err", 0, C1).currOffset == 84
    u = c.register(G, "cap_err", 0, C1, op=32)
    assert (u.success, u.errMsg, u.currOffset, u.HasField("maxOffset")) == (True, "OK!", -1, False)
    assert c.register(G, "cap_err", 0, C1, op=32).errCode == 411  # twice
    r = c.register(G, "cap_err", 0, C2)
    assert (r.success, r.currOffset) == (True, 84)


# ---------------------------------------------------------------------------------------------------
# offsets (§5.3, §5.2.6)


def fill(c: RawClient, n: int, partition: int = 0, topic: str = "cap_err") -> None:
    for i in range(n):
        assert send(c, topicName=topic, partitionId=partition, data=b"msg-%d" % i).success


def drain(c: RawClient, group: str, topic: str, partition: int, cid: str) -> list[bytes]:
    """Fetch with commit-on-fetch until the broker answers 404; returns the payloads."""
    out: list[bytes] = []
    for _ in range(100):
        m = c.fetch(group, topic, partition, cid)
        if not m.success:
            assert m.errCode == 404, m
            return out
        out += [x.payLoadData for x in m.messages]
    raise AssertionError("no 404 after 100 fetches")


def test_fetch_commit_rollback_and_lastpackconsumed(cluster: Any, c: RawClient) -> None:
    """File reads (capture s6c's shape): re-delivery, rollback, commit by fetch and by commit RPC."""
    fill(c, 6)
    flush(cluster)
    assert c.register(G, "cap_err", 0, C1).currOffset == 0
    m1 = c.fetch(G, "cap_err", 0, C1, last_consumed=False)
    assert m1.success and m1.errMsg == "OK!" and len(m1.messages) == 3  # half of the 6 entries
    assert (m1.currOffset, m1.maxOffset, m1.minLimitTime, m1.escFlowCtrl, m1.requireSlow) == (0, 168, 0, False, False)
    assert m1.currDataDlt > 0
    assert [codec.decode_message(codec.RawMessage(x.messageId, x.checkSum, x.payLoadData, x.flag), "cap_err").data
            for x in m1.messages] == [b"msg-0", b"msg-1", b"msg-2"]
    # lastPackConsumed false re-delivers the same batch
    m2 = c.fetch(G, "cap_err", 0, C1, last_consumed=False)
    assert [x.messageId for x in m2.messages] == [x.messageId for x in m1.messages] and m2.currOffset == 0
    # commit with lastPackConsumed false rolls back; an absent field then has nothing to commit
    assert c.commit(G, "cap_err", 0, C1, consumed=False).currOffset == 0
    assert c.commit(G, "cap_err", 0, C1, consumed=None).currOffset == 0
    m3 = c.fetch(G, "cap_err", 0, C1, last_consumed=True)  # nothing in flight: still from 0
    assert m3.currOffset == 0 and len(m3.messages) == 3
    m4 = c.fetch(G, "cap_err", 0, C1, last_consumed=True)  # commits m3, then reads 2 of the last 3
    assert (m4.currOffset, [x.payLoadData for x in m4.messages]) == (84, [b"msg-3", b"msg-4"])
    r = c.commit(G, "cap_err", 0, C1, consumed=None)  # absent = consumed
    assert (r.currOffset, r.maxOffset) == (140, 168)
    m5 = c.fetch(G, "cap_err", 0, C1)
    assert (m5.currOffset, [x.payLoadData for x in m5.messages]) == (140, [b"msg-5"])
    m6 = c.fetch(G, "cap_err", 0, C1)  # commits m5 first, then nothing is left
    assert (m6.success, m6.errCode, m6.errMsg) == (False, 404, "The request offset reached maxOffset!")
    assert (m6.currOffset, m6.minLimitTime, m6.currDataDlt, m6.escFlowCtrl) == (-1, -1, -1, False)
    assert not m6.HasField("maxOffset") and not m6.HasField("requireSlow")
    assert c.commit(G, "cap_err", 0, C1).currOffset == 168


def test_fetch_commit_rollback_of_fresh_data(c: RawClient) -> None:
    """Cache reads: the same offset rules, with everything of the partition returned at once."""
    fill(c, 6)
    c.register(G, "cap_err", 0, C1)
    m1 = c.fetch(G, "cap_err", 0, C1, last_consumed=False)
    assert (m1.currOffset, m1.maxOffset, m1.requireSlow) == (0, 168, False)
    assert [x.payLoadData for x in m1.messages] == [b"msg-%d" % i for i in range(6)]
    assert m1.currDataDlt == 0  # the last message returned is the data max
    m2 = c.fetch(G, "cap_err", 0, C1, last_consumed=False)  # re-delivered
    assert [x.messageId for x in m2.messages] == [x.messageId for x in m1.messages] and m2.currOffset == 0
    assert c.commit(G, "cap_err", 0, C1, consumed=False).currOffset == 0  # rolled back
    assert len(c.fetch(G, "cap_err", 0, C1).messages) == 6
    fill(c, 1)
    m3 = c.fetch(G, "cap_err", 0, C1)  # commits the six, then reads the new one
    assert (m3.currOffset, [x.payLoadData for x in m3.messages]) == (168, [b"msg-0"])
    r = c.commit(G, "cap_err", 0, C1, consumed=None)
    assert (r.currOffset, r.maxOffset) == (196, 196)
    assert c.fetch(G, "cap_err", 0, C1).errMsg == "The request offset reached maxOffset!"


def test_empty_store_404_and_sibling_partitions(cluster: Any, c: RawClient) -> None:
    assert c.register(G, "cap_err", 1, C1).maxOffset == 0
    m = c.fetch(G, "cap_err", 1, C1, last_consumed=False)
    assert (m.errCode, m.errMsg, m.minLimitTime, m.currOffset) == (404, "Request offset reached cache maxOffset", 0, -1)
    fill(c, 3, partition=0)
    fill(c, 1, partition=1)
    flush(cluster)
    # file reads that only scan sibling entries answer 200 without messages and commit at once (s2)
    m = c.fetch(G, "cap_err", 1, C1)
    assert m.success and not m.messages and m.currOffset == 0
    assert c.commit(G, "cap_err", 1, C1, consumed=False).currOffset == 56
    m = c.fetch(G, "cap_err", 1, C1)
    assert m.success and not m.messages and m.currOffset == 56
    m = c.fetch(G, "cap_err", 1, C1)
    assert m.currOffset == 84 and [x.payLoadData for x in m.messages] == [b"msg-0"]
    assert c.commit(G, "cap_err", 1, C1).currOffset == 112
    # a memory cache holding only sibling entries answers 404 and its entries count as read
    fill(c, 2, partition=0)
    m = c.fetch(G, "cap_err", 1, C1)
    assert (m.errCode, m.errMsg, m.currOffset, m.currDataDlt) == (404, "Can't found Message by index!", -1, -1)
    assert m.minLimitTime == cluster._call(lambda: cluster.server.stores.get("cap_err", 0).data_max)
    assert c.commit(G, "cap_err", 1, C1).currOffset == 168
    fill(c, 1, partition=0)
    fill(c, 1, partition=1)
    m = c.fetch(G, "cap_err", 1, C1)  # the cache holds partition 1 data: read to the cache's end
    assert (m.currOffset, m.maxOffset, [x.payLoadData for x in m.messages]) == (168, 224, [b"msg-0"])
    assert c.commit(G, "cap_err", 1, C1).currOffset == 224


def test_read_status_and_bootstrap_offsets(c: RawClient) -> None:
    fill(c, 5)
    assert c.register(G, "cap_err", 0, C1, read_status=1).currOffset == 140  # new group, from max
    assert c.register(G, "cap_err", 0, C1, read_status=0).currOffset == 140  # keeps the stored offset
    assert c.register(G, "cap_err", 0, C1, curr_offset=28).currOffset == 28
    assert c.fetch(G, "cap_err", 0, C1, last_consumed=False).currOffset == 28
    assert c.register(G, "cap_err", 0, C1, curr_offset=999999999).currOffset == 140  # clamped
    assert c.register(G, "cap_err", 0, C1, curr_offset=-1).currOffset == 140
    assert c.register(G, "cap_err", 0, C1, curr_offset=0).currOffset == 0
    assert c.register(G, "cap_err", 0, C1, read_status=2).currOffset == 140
    assert c.register("g_first", "cap_err", 0, C1, read_status=0).currOffset == 0


def test_unregister_commits_or_rolls_back(c: RawClient) -> None:
    fill(c, 4)
    c.register(G, "cap_err", 0, C1)
    assert len(c.fetch(G, "cap_err", 0, C1, last_consumed=False).messages) == 4
    c.register(G, "cap_err", 0, C1, op=32, read_status=1)  # rollback
    assert c.register(G, "cap_err", 0, C1).currOffset == 0
    assert len(c.fetch(G, "cap_err", 0, C1, last_consumed=False).messages) == 4
    c.register(G, "cap_err", 0, C1, op=32, read_status=0)  # commit
    assert c.register(G, "cap_err", 0, C1).currOffset == 112


def test_manual_commit_offset_accumulates(cluster: Any, c: RawClient) -> None:
    fill(c, 2)
    c.register(G, "cap_err", 0, C1)
    m = c.fetch(G, "cap_err", 0, C1, manual=True)
    assert m.currOffset == 0 and len(m.messages) == 2
    fill(c, 1)
    m = c.fetch(G, "cap_err", 0, C1, manual=True)  # reads on from committed + in-flight
    assert m.currOffset == 56 and len(m.messages) == 1
    # the reads accumulate in flight; nothing is committed until the commit RPC
    assert c.fetch(G, "cap_err", 0, C1, manual=True).errMsg == "The request offset reached maxOffset!"
    row = cluster.group_offsets(G)[0]
    assert (row["committed_offset"], row["inflight"]) == (0, 84)
    assert c.commit(G, "cap_err", 0, C1).currOffset == 84


def test_registration_expiry_rolls_back(tmp_path: Path) -> None:
    opts = dict(FAST_SERVER, consumer_reg_timeout_ms=400, **NO_CACHE_TIMER)
    with EmbeddedCluster(data_dir=tmp_path / "d", **opts) as cl:
        cl.create_topic("exp", partitions=1)
        with RawClient(cl.broker_address) as c:
            fill(c, 3, topic="exp")
            c.register(G, "exp", 0, C1)
            assert len(c.fetch(G, "exp", 0, C1, last_consumed=False).messages) == 3
            # while C1 is alive a second consumer is refused
            assert c.register(G, "exp", 0, C2).errCode == 410
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                r = c.register(G, "exp", 0, C2)
                if r.success:
                    break
                time.sleep(0.1)
            assert r.success and r.currOffset == 0  # in-flight read of C1 was rolled back
            m = c.fetch(G, "exp", 0, C1)
            assert m.errCode == 412


# ---------------------------------------------------------------------------------------------------
# filters (s4, s6c)


def test_broker_side_filter_by_java_hashcode(tmp_path: Path) -> None:
    with EmbeddedCluster(data_dir=tmp_path / "d", flush="always", **FAST_SERVER) as cl:
        cl.create_topic("cap_filter2", partitions=3)
        with RawClient(cl.broker_address) as c:
            types = ["typeA", "typeB", "typeC", None, "typeA", "typeB", "typeC", None, "typeA"]
            for i, t in enumerate(types):
                kw = {"msgType": t} if t else {}
                assert send(c, topicName="cap_filter2", partitionId=i % 3, data=b"filter msg #%d" % i, **kw).success
            got: list[bytes] = []
            for p in range(3):
                r = c.register(G, "cap_filter2", p, C1, filters=["typeA", "typeC"])
                assert r.success and r.currOffset == 0 and r.maxOffset == 252
                for _ in range(20):
                    m = c.fetch(G, "cap_filter2", p, C1)
                    if not m.success:
                        assert m.errCode == 404
                        if m.errMsg == "current offset is exceed max file offset":
                            continue  # fresh data still in the memory cache: the miss flushed it
                        assert m.errMsg == "The request offset reached maxOffset!"
                        break
                    assert m.requireSlow is True
                    got += [x.payLoadData for x in m.messages]
            assert sorted(got) == sorted(b"filter msg #%d" % i for i in (0, 2, 4, 6, 8))


def test_reads_scan_half_of_the_remaining_index(cluster: Any, c: RawClient) -> None:
    """Captures s2/s6c: where one FILE read stops (7 entries -> 4, 2, 1; 33 -> 17, 8, 4, 2, 1)."""
    fill(c, 7, partition=0)
    flush(cluster)
    c.register(G, "cap_err", 0, C1)
    reads = []
    for _ in range(5):
        m = c.fetch(G, "cap_err", 0, C1)
        if not m.success:
            break
        reads.append((m.currOffset, len(m.messages)))
    assert reads == [(0, 4), (112, 2), (168, 1)]
    assert c.commit(G, "cap_err", 0, C1).currOffset == 196
    # the memory cache is not halved: 7 fresh entries come in one read
    fill(c, 7, partition=0)
    m = c.fetch(G, "cap_err", 0, C1)
    assert (m.currOffset, len(m.messages), m.maxOffset) == (196, 7, 392)


def test_filtered_read_of_fresh_data(tmp_path: Path) -> None:
    """Capture s4: fresh data sits in the memory cache; the first filtered read answers the third 404."""
    with EmbeddedCluster(data_dir=tmp_path / "d", **FAST_SERVER, **NO_CACHE_TIMER) as cl:
        cl.create_topic("ft", partitions=1)
        with RawClient(cl.broker_address) as c:
            c.register(G, "ft", 0, C1, filters=["typeA"])
            assert send(c, topicName="ft", msgType="typeB").success
            assert send(c, topicName="ft", msgType="typeA").success
            m = c.fetch(G, "ft", 0, C1, last_consumed=False)
            assert (m.errCode, m.errMsg) == (404, "current offset is exceed max file offset")
            assert m.minLimitTime > 0 and m.currOffset == -1 and m.currDataDlt == -1
            m = c.fetch(G, "ft", 0, C1, last_consumed=False)  # the miss flushed the cache
            assert m.success and not m.messages and m.requireSlow and m.maxOffset == 56
            m = c.fetch(G, "ft", 0, C1)
            assert m.success and m.currOffset == 28 and len(m.messages) == 1 and m.requireSlow
            # unfiltered consumers read the cache directly
            c.register("plain", "ft", 0, C1)
            assert send(c, topicName="ft").success
            assert len(drain(c, "plain", "ft", 0, C1)) == 3


def test_memory_cache_flushes_by_age(tmp_path: Path) -> None:
    """cache_flush_interval_ms (memCacheFlushIntvl) moves the cache; the fsync period does not."""
    opts = dict(FAST_SERVER, consumer_reg_timeout_ms=400, flush_interval_ms=3_600_000)
    with EmbeddedCluster(data_dir=tmp_path / "d", cache_flush_interval_ms=100, **opts) as cl:
        cl.create_topic("ft", partitions=1)
        with RawClient(cl.broker_address) as c:
            assert send(c, topicName="ft", msgType="typeA").success
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                if cl._call(lambda: cl.server.stores.get("ft", 0).cache_start) == 28:
                    break
                time.sleep(0.02)
            c.register(G, "ft", 0, C1, filters=["typeA"])
            m = c.fetch(G, "ft", 0, C1)
            assert m.success and len(m.messages) == 1


def test_cache_flush_interval_is_its_own_setting(tmp_path: Path) -> None:
    assert ServerConfig(data_dir=tmp_path).cache_flush_interval_ms == 20000  # the real broker's default
    assert ServerConfig(data_dir=tmp_path).flush_interval_ms == 1000
    for bad in (0, -5, 1.5, True):
        with pytest.raises(ConfigError) as exc:
            ServerConfig(data_dir=tmp_path, cache_flush_interval_ms=bad)
        assert exc.value.field == "cache_flush_interval_ms"
    # housekeeping (which runs the cache timer) every 0.1 s, fsync every 50 ms, cache timer 20 s
    opts = dict(FAST_SERVER, consumer_reg_timeout_ms=400, flush_interval_ms=50)
    with EmbeddedCluster(data_dir=tmp_path / "d", **opts) as cl:
        cl.create_topic("ft", partitions=1)
        with RawClient(cl.broker_address) as c:
            assert send(c, topicName="ft").success
            store = cl._call(lambda: cl.server.stores.get("ft", 0))
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and cl._call(lambda: store.synced_offset) != 28:
                time.sleep(0.02)
            assert cl._call(lambda: store.synced_offset) == 28  # the fsync timer ran
            time.sleep(0.5)  # several fsync periods and housekeeping rounds
            assert cl._call(lambda: store.cache_start) == 0  # the data is still in the cache


# ---------------------------------------------------------------------------------------------------
# auth and admin views


def test_visit_token_check(tmp_path: Path) -> None:
    with EmbeddedCluster(data_dir=tmp_path / "d", visit_token_check=True, **FAST_SERVER) as cl:
        cl.create_topic("vt", partitions=1)
        with RawClient(cl.broker_address) as c:
            r = send(c, topicName="vt")
            assert (r.errCode, r.errMsg) == (415, "Visit Authorized Token is invalid!")
            token = cl._call(lambda: cl.server.master.tokens.current)
            req = send_req(topicName="vt")
            req.authInfo.visitAuthorizedToken = token
            assert c.rpc(13, req, broker_pb.SendMessageResponseB2P, service_type=3).success
            assert c.register(G, "vt", 0, C1).errCode == 415
            # getMessage and commit are never checked
            assert c.fetch(G, "vt", 0, C1).errCode == 411


def test_group_offsets_view(cluster: Any, c: RawClient) -> None:
    fill(c, 3)
    c.register(G, "cap_err", 0, C1)
    assert len(c.fetch(G, "cap_err", 0, C1, last_consumed=False).messages) == 3
    rows = cluster.group_offsets(G)
    assert rows == [{"broker_id": 1, "topic": "cap_err", "partition_id": 0, "consumer_id": C1,
                     "committed_offset": 0, "inflight": 84, "max_offset": 84, "lag": 84}]
    fill(c, 2)
    flush(cluster)
    c.fetch(G, "cap_err", 0, C1)  # commits 84, a file read of the 2 new entries scans 1
    assert cluster.group_offsets(G)[0] | {"consumer_id": None} == {
        "broker_id": 1, "topic": "cap_err", "partition_id": 0, "consumer_id": None, "committed_offset": 84,
        "inflight": 28, "max_offset": 140, "lag": 56}
    drain(c, G, "cap_err", 0, C1)
    assert cluster.group_offsets(G)[0]["lag"] == 0
    assert G in cluster._call(cluster.server.broker.views.groups)


def test_offsets_survive_restart(tmp_path: Path) -> None:
    d = tmp_path / "d"
    with EmbeddedCluster(data_dir=d, **FAST_SERVER) as cl:
        cl.create_topic("keep", partitions=1)
        with RawClient(cl.broker_address) as c:
            fill(c, 4, topic="keep")
            c.register(G, "keep", 0, C1)
            assert len(drain(c, G, "keep", 0, C1)) == 4
            assert c.commit(G, "keep", 0, C1).currOffset == 112
    with EmbeddedCluster(data_dir=d, **FAST_SERVER) as cl:
        assert [t.name for t in cl.topics()] == ["keep"]
        with RawClient(cl.broker_address) as c:
            r = c.register(G, "keep", 0, C1)
            assert (r.currOffset, r.maxOffset) == (112, 112)
            assert send(c, topicName="keep").appendOffset == 112


def test_delete_topic_drops_data(cluster: Any, c: RawClient) -> None:
    fill(c, 2)
    assert cluster.delete_topic("cap_err")
    assert send(c).errCode == 403
    cluster.create_topic("cap_err", partitions=3)
    assert send(c).appendOffset == 0
