"""Pure units of the producer: message preparation, msg_time, router, quality, SendFuture."""

from __future__ import annotations

import concurrent.futures
import datetime as dt
import threading
import time

import pytest

from tubemq import codec
from tubemq._bridge.futures import SendFuture
from tubemq.errors import DecodeError, InvalidMessageError, MessageTooLargeError, TopicNotPublishedError
from tubemq.producer.message import format_msg_time, prepare_message
from tubemq.producer.quality import BrokerQuality
from tubemq.producer.router import Router, key_partition


def test_prepare_plain_and_attributes() -> None:
    assert prepare_message("t", b"body") == ("t", b"body", 0, 4, None, None)
    t, payload, flag, size, mt, mtime = prepare_message(" t ", bytearray(b"body"), {"k1": "v1", "k2": 2})
    attr = b"k1=v1,k2=2"
    assert (t, flag, size, mt, mtime) == ("t", 1, 4 + len(attr), None, None)
    assert payload == len(attr).to_bytes(4, "big") + attr + b"body"
    assert codec.decode_payload(payload, flag) == ({"k1": "v1", "k2": "2"}, b"body")
    # Java order (captures/s1): system items first, then user items
    _, payload, flag, _, mt, mtime = prepare_message("t", b"b", {"k": "v"}, "typeA", "202611221030")
    assert payload[4:].startswith(b"$msgType$=typeA,$msgTime$=202611221030,k=v")
    assert (mt, mtime) == ("typeA", "202611221030")
    _, payload, flag, _, mt, mtime = prepare_message("t", b"b", None, "typeB")
    assert payload[4:-1] == b"$msgType$=typeB" and mtime is None
    # empty attributes: no header and flag 0 (not the Java empty-attribute quirk)
    assert prepare_message("t", b"b", {})[2] == 0


@pytest.mark.parametrize(
    "kwargs, code",
    [
        ({"topic": "", "data": b"x"}, 441),
        ({"topic": None, "data": b"x"}, 441),
        ({"topic": "t", "data": b""}, 442),
        ({"topic": "t", "data": b"x", "attributes": {"a=b": "c"}}, 400),
        ({"topic": "t", "data": b"x", "attributes": {"a": "c,d"}}, 400),
        ({"topic": "t", "data": b"x", "attributes": {"": "c"}}, 400),
        ({"topic": "t", "data": b"x", "attributes": ["a"]}, 400),
        ({"topic": "t", "data": b"x", "stream_id": "a,b"}, 400),
        ({"topic": "t", "data": b"x", "msg_time": "20261122"}, 400),
        ({"topic": "t", "data": b"x", "msg_time": "202613221030"}, 400),
        ({"topic": "t", "data": b"x", "msg_time": object()}, 400),
    ],
)
def test_prepare_rejects_bad_input(kwargs, code) -> None:
    with pytest.raises(InvalidMessageError) as ei:
        prepare_message(**kwargs)
    assert ei.value.code == code
    assert isinstance(ei.value, ValueError)  # also catchable as ValueError


@pytest.mark.parametrize("data", ["str", 5, None, 1.5])
def test_prepare_refuses_a_wrong_data_type_with_type_error(data: object) -> None:
    """A str (or int...) is a programming error: TypeError naming the argument, not a 400 answer."""
    with pytest.raises(TypeError, match="argument 'data' must be bytes-like, not " + type(data).__name__) as ei:
        prepare_message("t", data)
    assert not isinstance(ei.value, InvalidMessageError)


def test_prepare_protocol_size_limit() -> None:
    with pytest.raises(MessageTooLargeError):
        prepare_message("t", b"x" * (20 * 1024 * 1024 + 1))


def test_format_msg_time() -> None:
    assert format_msg_time(None) is None
    assert format_msg_time("  ") is None
    assert format_msg_time("202611221030") == "202611221030"
    assert format_msg_time(dt.datetime(2026, 11, 22, 10, 30, 59)) == "202611221030"
    ms = int(dt.datetime(2026, 11, 22, 10, 30).timestamp() * 1000)
    assert format_msg_time(ms) == "202611221030"  # epoch milliseconds, local time like Java


def _parts(n: int, brokers: int = 1) -> list[codec.Partition]:
    return [codec.Partition(1 + i % brokers, "h", 1, "t", i) for i in range(n)]


def test_router_round_robin_and_shielding() -> None:
    r = Router()
    parts = _parts(4, brokers=2)
    seq = [r.choose("t", parts).partition_id for _ in range(8)]
    assert sorted(seq[:4]) == [0, 1, 2, 3] and seq[:4] == seq[4:]
    picked = {r.choose("t", parts, excluded_brokers={1}).broker_id for _ in range(10)}
    assert picked == {2}
    # everything shielded: still sends somewhere
    assert r.choose("t", parts, excluded_brokers={1, 2}) in parts
    with pytest.raises(TopicNotPublishedError):
        r.choose("t", [])


def test_router_keys_and_custom() -> None:
    parts = _parts(7)
    r = Router()
    for key in ("a", b"a", 12345, "user-42"):
        assert len({r.choose("t", parts, key=key) for _ in range(5)}) == 1
    assert key_partition("a", parts) == key_partition(b"a", parts)
    assert key_partition("user-42", parts).partition_id == key_partition("user-42", _parts(7)).partition_id
    with pytest.raises(TypeError):
        r.choose("t", parts, key=1.5)
    assert Router(lambda t, k, p: 3).choose("t", parts).partition_id == 3
    assert Router(lambda t, k, p: p[5]).choose("t", parts).partition_id == 5
    with pytest.raises(TopicNotPublishedError):
        Router(lambda t, k, p: 99).choose("t", parts)
    with pytest.raises(TopicNotPublishedError):
        Router(lambda t, k, p: "nope").choose("t", parts)


def test_quality_shield_and_probe() -> None:
    q = BrokerQuality(failure_threshold=3, shield_ms=50, unavailable_ms=80)
    q.failure(1)
    q.failure(1)
    assert not q.is_shielded(1) and not q.any_shielded
    q.failure(1)
    assert q.is_shielded(1) and q.shielded() == {1}
    deadline = time.monotonic() + 5
    while q.shielded() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not q.is_shielded(1)
    q.failure(1)  # the probe after the shield failed: shielded again at once
    assert q.is_shielded(1)
    q.success(1)
    q.unavailable(2)
    assert q.shielded() >= {2}


def test_send_future_semantics() -> None:
    f: SendFuture[int] = SendFuture()
    assert not f.done() and not f.cancel() and f.running()
    f._complete(5, None)
    assert f.done() and f.result() == 5 and f.exception() is None
    g: SendFuture[int] = SendFuture()
    g._complete(None, ValueError("x"))
    with pytest.raises(ValueError):
        g.result()
    # a waiting thread and callbacks use the standard machinery
    h: SendFuture[int] = SendFuture()
    seen: list[int] = []
    h.add_done_callback(lambda fut: seen.append(fut.result()))
    threading.Timer(0.05, h._complete, args=(7, None)).start()
    assert h.result(timeout=5) == 7
    assert seen == [7]
    k: SendFuture[int] = SendFuture()
    threading.Timer(0.05, k._complete, args=(9, None)).start()
    done, _ = concurrent.futures.wait([k], timeout=5)
    assert k in done
    with pytest.raises(concurrent.futures.TimeoutError):
        SendFuture().result(timeout=0.01)


@pytest.mark.parametrize("impl_name", ["cython", "python"])
def test_decode_send_result_agrees_with_the_two_step_decode(impl_name: str) -> None:
    """The senders' one-call decode (``codec.decode_send_result``) gives what decode_response +
    decode_send_response + SendResult give, in both codec implementations: a SendResult when stored,
    None for a refusal or an error status, DecodeError for a malformed answer."""
    from tubemq.codec import python as _codec_py
    from tubemq.protocol import broker_pb
    from tubemq.types import Partition, SendResult

    if impl_name == "cython":
        impl = pytest.importorskip("tubemq.codec.compiled", reason="the compiled codec is not built")
    else:
        impl = _codec_py

    def payload(frame: bytes) -> bytes:
        ((_serial, body),) = _codec_py.FrameDecoder().feed(frame)
        return body

    part = Partition(1, "127.0.0.1", 8123, "t", 3)
    stored = payload(_codec_py.encode_response(5, 8, broker_pb.SendMessageResponseB2P(
        success=True, errCode=200, errMsg="ok", messageId=7, appendTime=1700000000000, appendOffset=280,
    ).SerializeToString()))
    refused = payload(_codec_py.encode_response(6, 8, broker_pb.SendMessageResponseB2P(
        success=False, errCode=503, errMsg="busy").SerializeToString()))
    error = payload(_codec_py.encode_error_response(7, "java.lang.Exception", "boom"))
    got = impl.decode_send_result(stored, SendResult, "t", part, b"k")
    assert type(got) is SendResult and got == SendResult("t", part, 7, 1700000000000, 280, b"k")
    assert got.partition_id == 3 and got.broker_id == 1
    rsp = impl.decode_response(stored)
    two_step = impl.decode_send_response(rsp.body)
    assert (got.message_id, got.append_time, got.append_offset) == (
        two_step.message_id, two_step.append_time, two_step.append_offset)
    assert impl.decode_send_result(refused, SendResult, "t", part, None) is None
    assert impl.decode_send_result(error, SendResult, "t", part, None) is None
    with pytest.raises(DecodeError):
        impl.decode_send_result(b"\x05\x01", SendResult, "t", part, None)
