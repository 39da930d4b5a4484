"""Decoded ``message_id``, ``offset`` and the attributes: the Cython codec keeps the first two as C values
and the attributes as their raw text, and builds the int, the dict, ``stream_id`` and ``msg_time`` on
first read. Whatever the order of reads, writes and deletes, both codecs must give the same values, the
same object on every read, and the same equality, repr, pickling and copies as a constructed message.
"""

from __future__ import annotations

import copy
import gc
import pickle
from types import ModuleType
from typing import Any

import pytest

from tubemq.codec import python as _codec_py
from tubemq.protocol import broker_pb

MIDS = (0, 1, 2**31, 2**63 - 1, -(2**63), -5)
ATTRS = "$msgType$=orders,$msgTime$=202401021530,k=v,empty="


def _body(curr: int, mids: tuple[int, ...] = MIDS) -> bytes:
    raws = []
    for i, mid in enumerate(mids):
        payload = _codec_py.encode_payload(b"lazy%d" % i, ATTRS if i % 2 else None)
        raws.append(_codec_py.encode_transfered_message(mid, _codec_py.crc32(payload), payload, i % 2))
    head = broker_pb.GetMessageResponseB2C(success=True, errCode=200, errMsg="OK", currOffset=curr,
                                           maxOffset=min(curr + 28 * len(mids), 2**63 - 1)).SerializeToString()
    return head + _codec_py.wrap_repeated(4, raws)


def _decode(impl: ModuleType, curr: int = 280, verify: bool = True) -> list[Any]:
    p = impl.Partition(1, "127.0.0.1", 8123, "lazy", 2)
    return list(impl.decode_get_message_response(_body(curr), "lazy", p, verify).messages)


@pytest.mark.parametrize("curr", [0, 280, 2**40, 2**63 - 100, -1])
@pytest.mark.parametrize("verify", [True, False])
def test_values_match_the_twin(impl: ModuleType, curr: int, verify: bool) -> None:
    got = _decode(impl, curr, verify)
    want = _decode(_codec_py, curr, verify)
    assert [(m.message_id, m.offset) for m in got] == [(m.message_id, m.offset) for m in want]
    assert [m.message_id for m in got] == list(MIDS)
    for m in got:
        assert type(m.message_id) is int and m.offset is None  # no per-message offset in the protocol
        assert m.message_id is m.message_id  # built once, then the same object


def test_writes_and_deletes_before_the_first_read(impl: ModuleType) -> None:
    a, b, c = _decode(impl)[:3]
    a.message_id = "x"
    a.offset = None
    assert (a.message_id, a.offset) == ("x", None)
    del b.message_id  # both codecs: deleting a field sets it to None
    del b.offset
    assert (b.message_id, b.offset) == (None, None)
    setattr(c, "off" + "set", 7)  # a name built at run time
    assert c.offset == 7 and c.message_id == 2**31


def test_equality_repr_pickle_copy_without_reading_first(impl: ModuleType) -> None:
    fresh = _decode(impl)
    seen = _decode(impl)
    for m in seen:
        assert (m.message_id, m.offset) is not None
    assert fresh == seen
    assert [repr(m) for m in fresh] == [repr(m) for m in seen]
    for m in _decode(impl):
        back = pickle.loads(pickle.dumps(m))
        assert back == m and back.offset == m.offset and back.message_id == m.message_id
    for m in _decode(impl):
        assert copy.copy(m) == m and copy.deepcopy(m).offset == m.offset
    twin = _decode(_codec_py)
    assert [repr(m) for m in fresh] == [repr(m) for m in twin]
    built = [impl.Message(m.topic, m.data, m.attributes, m.stream_id, m.msg_time, m.message_id, m.flag,
                          m.partition, m.offset) for m in twin]
    assert built == _decode(impl)


def test_reading_keeps_the_collector_state(impl: ModuleType) -> None:
    """An int is atomic: building it on read must not start tracking an untracked message."""
    ms = _decode(impl)
    before = [gc.is_tracked(m) for m in ms]
    for m in ms:
        assert (m.message_id, m.offset) is not None
    assert [gc.is_tracked(m) for m in ms] == before


def test_reused_messages_do_not_keep_old_values(impl: ModuleType) -> None:
    """Messages freed and rebuilt (the Cython freelist) carry the new answer's C values."""
    for curr in (280, 10_000, 0):
        ms = _decode(impl, curr)
        assert [m.offset for m in ms] == [None] * len(MIDS)
        assert [m.message_id for m in ms] == list(MIDS)
        del ms


def test_attributes_match_the_twin_in_any_read_order(impl: ModuleType) -> None:
    want = [(m.attributes, m.stream_id, m.msg_time) for m in _decode(_codec_py)]
    assert want[1] == ({"$msgType$": "orders", "$msgTime$": "202401021530", "k": "v", "empty": ""}, "orders",
                       "202401021530")
    by_attrs = [(m.attributes, m.stream_id, m.msg_time) for m in _decode(impl)]
    by_stream = [(m.stream_id, m.msg_time, m.attributes) for m in _decode(impl)]
    by_time = [(m.msg_time, m.attributes, m.stream_id) for m in _decode(impl)]
    assert by_attrs == want
    assert [(a, s, t) for s, t, a in by_stream] == want
    assert [(a, s, t) for t, a, s in by_time] == want


def test_attribute_writes_before_the_first_read(impl: ModuleType) -> None:
    """stream_id and msg_time are fields of their own: writing one never changes the others."""
    ms = _decode(impl)
    a, b, c = ms[1], ms[3], ms[5]
    a.attributes = {"x": "y"}
    assert (a.attributes, a.stream_id, a.msg_time) == ({"x": "y"}, "orders", "202401021530")
    b.stream_id = "mine"
    assert (b.stream_id, b.msg_time, b.attributes["$msgType$"]) == ("mine", "202401021530", "orders")
    c.msg_time = None
    c.attributes = {}
    assert (c.msg_time, c.stream_id, c.attributes) == (None, "orders", {})
    plain = ms[0]
    assert (plain.attributes, plain.stream_id, plain.msg_time) == ({}, None, None)


def test_field_resets_are_the_same_on_both_codecs(impl: ModuleType) -> None:
    """Setting or deleting fields, on a decoded and on a constructed message: one contract for both
    codecs (attributes are always a dict; a deleted field reads None; unknown names are refused)."""
    for m in (_decode(impl)[1], impl.Message("t", b"x", {"a": "b"}, "s", "202401021530", 5, 0, None, 7)):
        m.attributes = None
        assert m.attributes == {}
        m.attributes = {"k": "v"}
        del m.attributes
        assert m.attributes == {}
        for name in ("topic", "data", "stream_id", "msg_time", "message_id", "flag", "partition", "offset"):
            delattr(m, name)
            assert getattr(m, name) is None, name
        with pytest.raises(AttributeError):
            m.not_a_field = 1  # type: ignore[attr-defined]
        with pytest.raises(AttributeError):
            del m.not_a_field  # type: ignore[attr-defined]
        back = pickle.loads(pickle.dumps(m))
        assert back == m and type(back) is type(m)


def test_twin_and_compiled_messages_compare_and_pickle_alike(impl: ModuleType) -> None:
    twin = _decode(_codec_py)
    mine = _decode(impl)
    assert [pickle.loads(pickle.dumps(m)).attributes for m in twin] == [m.attributes for m in mine]
    assert [copy.copy(m).attributes for m in twin] == [m.attributes for m in mine]
