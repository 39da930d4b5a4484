"""The codec's public data types: one home (tubemq.types) and the same shape in both codecs.

``tubemq.types`` documents Message, Partition and BrokerInfo; the codec in use builds them. The compiled
Message is a cdef class and the twin's a plain class, so nothing but these tests keeps their fields,
defaults and methods alike.
"""

from __future__ import annotations

from types import ModuleType

import pytest

import tubemq
from tubemq import codec, types
from tubemq.codec import python as _codec_py

from .conftest import NO_EXT

FIELDS = ("topic", "data", "attributes", "stream_id", "msg_time", "message_id", "flag", "partition", "offset")


def _public(cls: type) -> set[str]:
    return {n for n in dir(cls) if not n.startswith("_")}


def test_one_home_for_the_codec_types() -> None:
    for name in ("Message", "Partition", "BrokerInfo"):
        assert getattr(types, name) is getattr(codec, name) is getattr(tubemq, name), name
        assert name in types.__all__


@pytest.mark.skipif(NO_EXT, reason="TUBEMQ_NO_EXTENSIONS=1: no compiled codec to compare with")
def test_compiled_and_twin_types_match() -> None:
    from tubemq.codec import compiled as _codec

    # the NamedTuples are the twin's own classes in both codecs (one class per name in the process)
    assert _codec.Partition is _codec_py.Partition and _codec.BrokerInfo is _codec_py.BrokerInfo
    compiled, twin = _codec.Message, _codec_py.Message
    assert _public(compiled) == _public(twin), _public(compiled) ^ _public(twin)
    assert set(FIELDS) <= _public(twin)


@pytest.mark.parametrize("impl", ["python", pytest.param("cython", marks=pytest.mark.skipif(NO_EXT, reason="no ext"))])
def test_message_defaults_and_order(impl: str) -> None:
    mod: ModuleType = _codec_py
    if impl == "cython":
        from tubemq.codec import compiled as mod  # type: ignore[no-redef]
    p = mod.Partition(1, "h", 8123, "t", 3)
    m = mod.Message("t", b"x")
    assert [getattr(m, f) for f in FIELDS] == ["t", b"x", {}, None, None, 0, 0, None, -1]
    values = ["t", b"y", {"k": "v"}, "s", "20260101", 7, 1, p, 28]
    full = mod.Message(*values)
    assert [getattr(full, f) for f in FIELDS] == values
    assert full == mod.Message(**dict(zip(FIELDS, values, strict=True)))
    assert full.value == b"y" and full != m
    with pytest.raises(TypeError):
        hash(full)
    assert repr(full) == _codec_py.message_repr(full)
    assert (p.key, p.address, str(p)) == ("1:t:3", "h:8123", "1:h:8123#t:3")
    b = mod.BrokerInfo(1, "h", 8123)
    assert (b.address, str(b)) == ("h:8123", "1:h:8123")
