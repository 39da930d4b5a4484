"""Decoded messages and the cycle collector.

The Cython codec builds decoded messages untracked by the collector (their fields are atomic or a dict of
str nothing else holds), and tracks a message again before it can join a cycle. Every cycle below must be
freed by ``gc.collect()``: a sentinel in the cycle is watched through a weakref. Both codecs run these
(the pure-Python twin's messages are always tracked: its behaviour must not change).
"""

from __future__ import annotations

import copy
import gc
import pickle
import weakref
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

from tubemq.codec import python as _codec_py
from tubemq.protocol import broker_pb

from .conftest import NO_EXT, _cython

FIELDS = ("topic", "data", "stream_id", "msg_time", "message_id", "flag", "partition", "offset")


class Sentinel:
    """Put in a cycle; its weakref dies only when the collector frees the cycle."""


def _body(n: int) -> bytes:
    """A GetMessageResponseB2C of ``n`` valid messages, attributes on every other one."""
    raws = []
    for i in range(n):
        payload = _codec_py.encode_payload(b"m%d" % i, "$msgType$=o,$msgTime$=202401010000,k=v" if i % 2 else None)
        raws.append(_codec_py.encode_transfered_message(500 + i, _codec_py.crc32(payload), payload, i % 2))
    head = broker_pb.GetMessageResponseB2C(success=True, errCode=200, errMsg="OK", currOffset=280,
                                           maxOffset=900).SerializeToString()
    return head + _codec_py.wrap_repeated(4, raws)


def _decoded(impl: ModuleType, partition: Any = None) -> list[Any]:
    if partition is None:
        partition = impl.Partition(1, "127.0.0.1", 8123, "gc-topic", 2)
    return list(impl.decode_get_message_response(_body(4), "gc-topic", partition).messages)


def _assert_collected(make_cycle: Callable[[Sentinel], None]) -> None:
    """``make_cycle(s)`` builds a cycle holding ``s`` and drops its own references to it."""
    gc.collect()
    s = Sentinel()
    ref = weakref.ref(s)
    make_cycle(s)
    del s
    assert ref() is not None, "the cycle must keep the sentinel alive until a collection"
    gc.collect()
    assert ref() is None, "a cycle through a Message was not collected"


def test_decoded_messages_start_untracked_on_cython(impl: ModuleType) -> None:
    msgs = _decoded(impl)
    assert len(msgs) == 4 and msgs[1].stream_id == "o" and msgs[1].msg_time == "202401010000"
    if impl is _codec_py:
        assert all(gc.is_tracked(m) for m in msgs)  # the twin: unchanged
        return
    assert not any(gc.is_tracked(m) for m in msgs)
    # reading the fields (except attributes) leaves them untracked
    assert [m.offset for m in msgs] == [None] * 4 and msgs[0].data == b"m0"
    assert not any(gc.is_tracked(m) for m in msgs)
    # what the collector would see holds nothing it tracks (the partition tuple holds str and int)
    for m in msgs:
        assert not any(gc.is_tracked(r) for r in gc.get_referents(m) if not isinstance(r, tuple))
    # single-message decode: untracked too
    payload = _codec_py.encode_payload(b"x", None)
    raw = _codec_py.RawMessage(7, _codec_py.crc32(payload), payload, 0)
    assert not gc.is_tracked(impl.decode_message(raw, "t", None, 28))


def test_messages_stay_tracked_when_the_caller_passes_containers(impl: ModuleType) -> None:
    """A topic or partition the collector tracks (a list, a tuple holding one): the decoder tracks."""
    holder: list[Any] = []
    msgs = _decoded(impl, partition=holder)
    assert all(gc.is_tracked(m) for m in msgs)

    def cycle_via_partition(s: Sentinel) -> None:
        part: list[Any] = [s]
        for m in _decoded(impl, partition=part):
            part.append(m)

    _assert_collected(cycle_via_partition)

    def cycle_via_nested_tuple(s: Sentinel) -> None:
        box: list[Any] = [s]
        for m in _decoded(impl, partition=(1, box)):
            box.append(m)

    _assert_collected(cycle_via_nested_tuple)
    payload = _codec_py.encode_payload(b"x", None)
    raw = _codec_py.RawMessage(7, _codec_py.crc32(payload), payload, 0)
    off: list[Any] = []
    m = impl.decode_message(raw, "t", None, off)
    assert gc.is_tracked(m)

    def cycle_via_offset(s: Sentinel) -> None:
        o: list[Any] = [s]
        o.append(impl.decode_message(raw, "t", None, o))

    _assert_collected(cycle_via_offset)


def test_attribute_access_tracks_and_its_cycles_are_collected(impl: ModuleType) -> None:
    def via_attributes_item(s: Sentinel) -> None:
        m = _decoded(impl)[1]
        a = m.attributes
        assert gc.is_tracked(m) and a["k"] == "v"
        a["self"] = m
        a["s"] = s

    _assert_collected(via_attributes_item)

    def via_empty_attributes(s: Sentinel) -> None:
        m = _decoded(impl)[0]  # no attributes: the dict is made on first use
        m.attributes["x"] = [m, s]

    _assert_collected(via_empty_attributes)

    def via_attributes_assignment(s: Sentinel) -> None:
        m = _decoded(impl)[2]
        m.attributes = {"x": m, "s": s}

    _assert_collected(via_attributes_assignment)

    def via_attributes_descriptor(s: Sentinel) -> None:
        m = _decoded(impl)[2]
        type(m).attributes.__set__(m, {"x": m, "s": s})

    _assert_collected(via_attributes_descriptor)


@pytest.mark.parametrize("field", FIELDS)
def test_any_field_write_tracks_and_its_cycles_are_collected(impl: ModuleType, field: str) -> None:
    def via_field(s: Sentinel) -> None:
        m = _decoded(impl)[1]
        setattr(m, field, [m, s])
        assert gc.is_tracked(m)

    _assert_collected(via_field)

    def via_field_dict(s: Sentinel) -> None:
        m = _decoded(impl)[0]
        setattr(m, field, {"m": m, "s": s})

    _assert_collected(via_field_dict)
    m = _decoded(impl)[0]
    setattr(m, field, 5)  # even an atomic value: tracked again (one rule, nothing to reason about)
    assert gc.is_tracked(m) and getattr(m, field) == 5

    def via_built_name(s: Sentinel) -> None:
        m = _decoded(impl)[3]
        setattr(m, "".join(list(field)), [m, s])  # a name made at run time, not the interned one
        assert gc.is_tracked(m)

    _assert_collected(via_built_name)


@pytest.mark.skipif(NO_EXT, reason="TUBEMQ_NO_EXTENSIONS=1: Cython codec not tested")
def test_writes_cannot_bypass_the_tracking() -> None:
    """Cython only: the twin's slots are ordinary descriptors and its messages are always tracked."""
    m = _decoded(_cython())[0]
    with pytest.raises(AttributeError):
        type(m).data.__set__(m, [m])  # the fields are readonly descriptors: only __setattr__ writes
    # refused either way: TypeError through 3.12, AttributeError ("not writable") from CPython 3.13
    with pytest.raises((TypeError, AttributeError)):
        object.__setattr__(m, "data", [m])
    assert not gc.is_tracked(m)
    del m.topic  # as before: deleting a field sets it to None
    assert m.topic is None and gc.is_tracked(m)
    with pytest.raises(AttributeError):
        m.nonexistent = 1


def test_constructor_init_pickle_and_copy_keep_cycles_collectable(impl: ModuleType) -> None:
    def via_constructor(s: Sentinel) -> None:
        box: list[Any] = [s]
        box.append(impl.Message("t", b"d", {"k": "v"}, partition=box))

    _assert_collected(via_constructor)

    def via_reinit(s: Sentinel) -> None:
        m = _decoded(impl)[0]
        box: list[Any] = [s, m]
        m.__init__("t", b"d", None, None, None, 0, 0, box, 0)  # type: ignore[misc]
        assert gc.is_tracked(m)

    _assert_collected(via_reinit)

    def via_pickle(s: Sentinel) -> None:
        m = _decoded(impl)[1]
        m2 = pickle.loads(pickle.dumps(m))
        assert m2 == m and gc.is_tracked(m2)
        m2.attributes["x"] = [m2, s]

    _assert_collected(via_pickle)

    def via_copy(s: Sentinel) -> None:
        m = _decoded(impl)[1]
        m2 = copy.copy(m)  # shares the attribute dict: both end up tracked
        assert gc.is_tracked(m) and gc.is_tracked(m2)
        m2.attributes["x"] = [m, s]

    _assert_collected(via_copy)


def test_reused_messages_start_untracked_again(impl: ModuleType) -> None:
    """Messages dropped tracked (after a write) and rebuilt from the freelist start untracked again."""
    for _ in range(3):
        msgs = _decoded(impl)
        assert all(gc.is_tracked(m) for m in msgs) == (impl is _codec_py)
        for m in msgs:
            m.offset = 0
        assert all(gc.is_tracked(m) for m in msgs)
        del msgs, m
