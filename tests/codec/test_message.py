"""Message objects, constants and the facade."""

from __future__ import annotations

import copy
import gc
import os
import pickle
import sys
from types import ModuleType

import pytest

from tubemq import codec
from tubemq.codec import python as _codec_py
from tubemq.errors import DecodeError
from tubemq.protocol import broker_pb, constants

FIELDS = ("topic", "data", "attributes", "stream_id", "msg_time", "message_id", "flag", "partition", "offset")


def test_message_defaults_and_attributes(impl: ModuleType) -> None:
    m = impl.Message("t", b"x")
    assert (m.topic, m.data, m.attributes, m.stream_id, m.msg_time) == ("t", b"x", {}, None, None)
    assert (m.message_id, m.flag, m.partition, m.offset) == (0, 0, None, -1)
    assert m.value == b"x"
    p = impl.Partition(1, "h", 2, "t", 3)
    m2 = impl.Message(topic="t", data=b"y", attributes={"a": "1"}, stream_id="s", msg_time="2024",
                      message_id=9, flag=1, partition=p, offset=28)
    for name, value in zip(FIELDS, ("u", b"z", {"b": "2"}, "s2", "t2", 10, 0, None, 56), strict=True):
        setattr(m2, name, value)
        assert getattr(m2, name) == value
    with pytest.raises(AttributeError):
        m.nonexistent = 1  # type: ignore[attr-defined]
    # each message gets its own attribute dict
    a, b = impl.Message("t", b""), impl.Message("t", b"")
    a.attributes["k"] = "v"
    assert b.attributes == {}


def test_message_eq_and_repr(impl: ModuleType) -> None:
    p = impl.Partition(1, "h", 2, "t", 3)
    a = impl.Message("t", b"x" * 40, {"a": "1"}, "s", None, 5, 1, p, 28)
    b = impl.Message("t", b"x" * 40, {"a": "1"}, "s", None, 5, 1, p, 28)
    assert a == b and not (a != b)
    b.offset = 56
    assert a != b
    assert a != "not a message"
    with pytest.raises(TypeError):
        hash(a)
    r = repr(a)
    assert r == (
        "Message(topic='t', partition='1:t:3', offset=28, message_id=5, stream_id='s', "
        f"data={b'x' * 32!r}...)"
    )
    assert repr(impl.Message("t", b"ab")) == (
        "Message(topic='t', partition=None, offset=-1, message_id=0, stream_id=None, data=b'ab')"
    )
    assert repr(a) == repr(_codec_py.Message("t", b"x" * 40, {"a": "1"}, "s", None, 5, 1, p, 28))


def test_message_copy_and_pickle(impl: ModuleType) -> None:
    p = impl.Partition(1, "h", 2, "t", 3)
    a = impl.Message("t", b"x", {"a": "1"}, "s", "tm", 5, 1, p, 28)
    assert pickle.loads(pickle.dumps(a)) == a
    assert copy.copy(a) == a


def test_constants_match_protocol(impl: ModuleType) -> None:
    assert impl.BEGIN_TOKEN == constants.BEGIN_TOKEN
    assert impl.MAX_BLOCK_SIZE == constants.MAX_BLOCK_SIZE
    assert impl.MAX_LIST_SIZE == constants.MAX_LIST_SIZE
    assert impl.DEFAULT_MAX_FRAME_SIZE == constants.MAX_FRAME_SIZE
    assert impl.DEFAULT_BROKER_PORT == constants.DEFAULT_BROKER_PORT
    assert impl.META_STORE_INS_BASE == constants.META_STORE_INS_BASE
    assert impl.INDEX_ENTRY_SIZE == constants.INDEX_ENTRY_SIZE
    assert impl.TOKEN_MSG_TYPE == constants.TOKEN_MSG_TYPE
    assert impl.TOKEN_MSG_TIME == constants.TOKEN_MSG_TIME
    assert impl.FrameDecoder().max_frame_size == constants.MAX_FRAME_SIZE
    assert impl.FrameDecoder().max_blocks == constants.MAX_LIST_SIZE


def test_same_public_names() -> None:
    if os.environ.get("TUBEMQ_NO_EXTENSIONS", "") not in ("", "0"):
        pytest.skip("no Cython codec")
    from tubemq.codec import compiled as _codec
    from tubemq.codec._protocols import CodecModule

    # the shared contract (tubemq.codec._protocols) names everything both modules provide
    contract = {n for n in dir(CodecModule) if not n.startswith("_")} | set(CodecModule.__annotations__)
    assert len(contract) > 40
    missing = sorted(n for n in contract if not hasattr(_codec, n) or not hasattr(_codec_py, n))
    assert missing == []
    # the small result types are shared, so values compare equal across implementations
    for name in ("BrokerInfo", "Partition", "TopicPartition", "SubscribeInfo", "Response", "Request",
                 "SendResponse", "RawMessage", "GetMessageResult"):
        assert getattr(_codec, name) is getattr(_codec_py, name)
    assert _codec.implementation == "cython" and _codec_py.implementation == "python"


def test_facade_exports_everything() -> None:
    impl = _codec_py if codec.implementation == "python" else pytest.importorskip("tubemq.codec.compiled")
    for name in codec.__all__:
        if name not in ("implementation", "os", "annotations"):
            assert getattr(codec, name) is getattr(impl, name), name
    assert codec.implementation == ("python" if os.environ.get("TUBEMQ_NO_EXTENSIONS", "") not in ("", "0")
                                    else "cython")


def _fetch_body(checksums_ok: list[bool]) -> bytes:
    """A GetMessageResponseB2C: per True a 100-byte message (with attributes every other one), per False
    a bad-checksum message whose payload is too short for its attribute flag (dropped, or an error
    with verify=False)."""
    raws = []
    for i, ok in enumerate(checksums_ok):
        if ok:
            payload = _codec_py.encode_payload(bytes(range(100)), "$msgType$=o,region=sh" if i % 2 else None)
            raws.append(_codec_py.encode_transfered_message(1000 + i, _codec_py.crc32(payload), payload, i % 2))
        else:
            raws.append(_codec_py.encode_transfered_message(1000 + i, 1, b"\x00\x01", 1))
    head = broker_pb.GetMessageResponseB2C(success=True, errCode=200, errMsg="OK!", currOffset=300,
                                           maxOffset=900).SerializeToString()
    return head + _codec_py.wrap_repeated(4, raws)


def test_decoded_messages_own_their_references(impl: ModuleType) -> None:
    """Decoded messages and their list: no reference gained or lost, usable after drops and collections."""
    topic = "refcount-topic"
    p = impl.Partition(1, "h", 2, topic, 3)
    oks = [True, False, True, True, False, True]
    body = _fetch_body(oks)
    before = (sys.getrefcount(topic), sys.getrefcount(p), sys.getrefcount(impl.Message))
    for i in range(300):
        r = impl.decode_get_message_response(body, topic, p)
        if i % 50 == 0:
            gc.collect()  # the collector walks the list and the messages
        assert r.dropped == 2 and len(r.messages) == 4
        assert [m.message_id for m in r.messages] == [1000, 1002, 1003, 1005]
        assert r.curr_offset == 300 and [m.offset for m in r.messages] == [None] * 4
        assert all(m.topic is topic and m.partition is p for m in r.messages)
        assert [m.stream_id for m in r.messages] == [None, None, "o", "o"]
        r.messages.append("x")  # an ordinary list after the size was cut
        r.messages.extend(r.messages[:2])
        assert len(r.messages) == 7 and r.messages[4] == "x" and r.messages[5] is r.messages[0]
        with pytest.raises(DecodeError):
            impl.decode_get_message_response(body, topic, p, verify=False)  # fails mid-list
        del r
    gc.collect()
    assert (sys.getrefcount(topic), sys.getrefcount(p), sys.getrefcount(impl.Message)) == before
    s = impl.decode_send_response(broker_pb.SendMessageResponseB2P(
        success=True, errCode=200, errMsg="ok", messageId=7, appendTime=1700000000000, appendOffset=280,
    ).SerializeToString())
    assert s == impl.SendResponse(True, 200, "ok", 7, 1700000000000, 280, False)
    assert pickle.loads(pickle.dumps(s)) == s and copy.copy(s) == s
