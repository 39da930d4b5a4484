"""Public API of tubemq.inlongmsg beyond the vectors: strictness, bounds, builder rules, attr parsing."""

from __future__ import annotations

import sys
from types import ModuleType

import pytest

from tubemq.codec import _inlongmsg_py
from tubemq.errors import DecodeError, InLongMsgError


def _v1(groups: list[tuple[bytes, int, bytes]]) -> bytes:
    """A hand-made v1 container: (attr, flag, payload) per group."""
    out = b"\x0f\x01" + (1234).to_bytes(8, "big") + len(groups).to_bytes(4, "big")
    for attr, flag, payload in groups:
        out += len(attr).to_bytes(2, "big") + attr + (len(payload) + 1).to_bytes(4, "big") + bytes([flag]) + payload
    return out + b"\x0f\x01"


def _item(body: bytes) -> bytes:
    return len(body).to_bytes(4, "big") + body


def test_error_is_a_decode_error() -> None:
    assert issubclass(InLongMsgError, DecodeError)


def test_round_trip_all_versions(api: ModuleType) -> None:
    bodies = [b"", b"a", b"line\nwith LF", bytes(range(256)), b"x" * 5000]
    for version in (1, 2):
        for compress in (False, True):
            b = api.InLongMsgBuilder(version, compress)
            for i, body in enumerate(bodies):
                b.add(f"m=0&k={i % 2}", body)
            m = api.decode(b.build(42))
            assert m.version == version and m.create_time == 42
            assert m.attrs == ("m=0&k=0", "m=0&k=1")
            assert m.bodies("m=0&k=0") == bodies[0::2]
            assert m.bodies("m=0&k=1") == bodies[1::2]
            assert m.msg_count == (5 if version == 2 else 0)
            assert [m.attr_msg_count(a) for a in m.attrs] == ([3, 2] if version == 2 else [0, 0])
    with pytest.raises(KeyError):
        m.bodies("nope")


def test_v3_round_trip(api: ModuleType) -> None:
    rec = _item(b"msg1") + _item(b"p=1") + _item(b"msg2") + _item(b"p=2") + _item(b"msg3") + _item(b"p=1")
    b = api.InLongMsgBuilder(3, compress=False)
    b.add("groupId=g&streamId=s", rec)
    assert b.msg_count == 3
    m = api.decode(b.build(7))
    assert m.attrs == ("groupId=g&streamId=s&p=1", "groupId=g&streamId=s&p=2")
    assert m.bodies("groupId=g&streamId=s&p=1") == [b"msg1", b"msg3"]
    with pytest.raises(ValueError, match="v3 record"):
        b.add("a", b"\x00\x00\x00\x09abc")


def test_v4_binary_round_trip(api: ModuleType) -> None:
    bodies = [b"alpha", b"", b"gamma" * 30]
    for compress in (False, True):
        b = api.InLongMsgBuilder(4, compress)
        b.add_binary(api.binary_message(bodies, "m=0&iname=x", group_id=3, stream_id=4, data_time=1700000000))
        data = b.build()
        m = api.decode(data)
        assert m.version == 4 and m.create_time == 1700000000000 and m.msg_count == 3
        assert m.is_num_group_id and not m.is_support_lf
        assert len(m.attrs) == 1
        assert api.parse_attr(m.attrs[0]) == {
            "m": "0", "iname": "x", "dt": "1700000000000", "groupId": "3", "streamId": "4", "cnt": "3",
        }
        assert m.bodies(m.attrs[0]) == bodies
        assert (data[2 + 4] & 0x20 != 0) == compress
    b = api.InLongMsgBuilder(4)
    b.add_binary(api.binary_message([b"m1", b"m2"], "a=1", private_attrs=["k=1", "k=2"], ext=0x4 | 0x20))
    m = api.decode(b.build())
    assert not m.is_num_group_id and m.is_support_lf
    assert [api.parse_attr(a)["k"] for a in m.attrs] == ["1", "2"]
    assert [bytes(x) for _, x in m] == [b"m1", b"m2"]


def test_builder_misuse(api: ModuleType) -> None:
    with pytest.raises(ValueError):
        api.InLongMsgBuilder(0)
    with pytest.raises(ValueError):
        api.InLongMsgBuilder(5)
    b4 = api.InLongMsgBuilder(4)
    with pytest.raises(ValueError):
        b4.add("a=1", b"x")
    with pytest.raises(ValueError, match="add_binary"):
        b4.build()
    with pytest.raises(ValueError):
        b4.add_binary(b"\x00" * 10)
    good = api.binary_message([b"x"])
    with pytest.raises(ValueError, match="magic"):
        b4.add_binary(good[:-2] + b"\x00\x00")
    b4.add_binary(good)
    with pytest.raises(ValueError, match="exactly one"):
        b4.add_binary(good)
    with pytest.raises(ValueError):
        api.InLongMsgBuilder(1).add_binary(good)
    with pytest.raises(ValueError, match="65535"):
        api.InLongMsgBuilder(1).add("x" * 70000, b"body")


def test_capacity_is_soft_like_java(api: ModuleType) -> None:
    b = api.InLongMsgBuilder(1, compress=False, capacity=100)
    assert b.add("a=1", b"x" * 50) is True  # 16 + (3 + 7) + 54 = 80 < 100
    assert b.add("a=1", b"y" * 50) is False  # stored anyway
    assert b.is_full()
    assert api.decode(b.build(1)).bodies("a=1") == [b"x" * 50, b"y" * 50]


def test_decode_accepts_buffers(api: ModuleType) -> None:
    b = api.InLongMsgBuilder(1, compress=False)
    b.add("a=1", b"hello")
    data = b.build(5)
    for buf in (bytearray(data), memoryview(data)):
        assert api.decode(buf).bodies("a=1") == [b"hello"]


@pytest.mark.parametrize(
    "data, match",
    [
        (b"", "at least 4"),
        (b"\x0f\x01\x0f\x01", "truncated"),
        (_v1([(b"a=1", 0, _item(b"abc") + b"\x00\x01")]), "stray bytes"),
        (_v1([(b"a=1", 0, _item(b"abc")[:-1])]), "length 3 but 2"),
        (_v1([(b"a=1", 0, b"\xff\xff\xff\xff")]), "length -1"),
        (_v1([(b"a=1", 0, _item(b"abc"))])[:-3] + b"\x0f\x01", "data length"),
        (_v1([(b"a\xff", 0, _item(b"abc"))]), "modified UTF-8"),
        (_v1([(b"a=1", 1, b"\x80\x80\x80\x80\x08" + b"\x00" * 10)]), "claims"),  # 2 GiB from 15 bytes
        (_v1([(b"a=1", 1, b"\x05\x00")]), "snappy"),
    ],
)
def test_damaged_input_raises(api: ModuleType, data: bytes, match: str) -> None:
    with pytest.raises(InLongMsgError, match=match):
        api.decode(data)


def test_v4_damage_raises(api: ModuleType) -> None:
    b = api.InLongMsgBuilder(4, compress=False)
    b.add_binary(api.binary_message([b"abc", b"de"], "a=1"))
    good = bytearray(b.build())
    api.decode(bytes(good))
    bad_total = bytearray(good)
    bad_total[2:6] = (999).to_bytes(4, "big")
    bad_magic = bytearray(good)
    bad_magic[-4:-2] = b"\x00\x00"
    bad_attrs = bytes(good).replace(b"a=1", b"a=b")
    dup = api.binary_message([b"x"], "a=1&a=2")
    snappy_claim = bytearray(api.binary_message([b"x" * 10]))
    snappy_claim[4] |= 0x20
    snappy_claim[25:25 + 4] = b"\xff\xff\xff\x0f"  # declares 4 GiB
    for data in (bad_total, bad_magic, bytes(good[:20]) + b"\x0f\x04", b"\x0f\x04" + dup + b"\x0f\x04",
                 b"\x0f\x04" + bytes(snappy_claim) + b"\x0f\x04"):
        with pytest.raises(InLongMsgError):
            api.decode(bytes(data))
    assert api.decode(bad_attrs).attrs  # a=b is still key=value


def test_decoded_size_is_bounded(api: ModuleType) -> None:
    b = api.InLongMsgBuilder(1, compress=True, capacity=1 << 30)
    for _ in range(1000):
        b.add("a=1", b"z" * 1000)
    data = b.build(1)
    m = api.decode(data)
    total = sum(len(x) for _, x in m)
    assert total == 1_000_000
    assert total <= _inlongmsg_py.SNAPPY_MAX_RATIO * len(data)


def test_missing_snappy_names_the_extra(monkeypatch: pytest.MonkeyPatch, api: ModuleType) -> None:
    """Without cramjam snappy containers still decode (built-in decoder); only compressing needs the extra."""
    b = api.InLongMsgBuilder(1, compress=True)
    b.add("a=1", b"hello hello hello hello")
    packed = b.build(1)
    monkeypatch.setattr(_inlongmsg_py, "_snappy", None)
    monkeypatch.setitem(sys.modules, "cramjam", None)
    assert api.decode(packed).bodies("a=1") == [b"hello hello hello hello"]
    with pytest.raises(InLongMsgError, match="snappy"):
        api.decode(_v1([(b"a=1", 1, b"\x04\x0cab")]))  # truncated literal
    with pytest.raises(InLongMsgError, match=r"tubemq\[inlong\]"):
        b = api.InLongMsgBuilder(1, compress=True)
        b.add("a=1", b"x")
        b.build()
    b = api.InLongMsgBuilder(1, compress=False)  # raw containers need no snappy
    b.add("a=1", b"x")
    assert api.decode(b.build()).bodies("a=1") == [b"x"]


@pytest.mark.parametrize(
    "attr, expected",
    [
        ("", {}),
        ("novalue", {}),
        ("a=1", {"a": "1"}),
        ("a=1&b=x=y", {"a": "1", "b": "x=y"}),
        ("a=1&", {"a": "1&"}),
        ("a=1&e", {"a": "1&e"}),
        ("a=1&&b=2", {"a": "1&", "b": "2"}),
        ("c&d=v", {"c&d": "v"}),
        (" a = 1 ", {" a ": " 1 "}),
        ("a=1&a=2", {"a": "2"}),
        ("a=1&b=x=y&c&d=&&e=5", {"a": "1", "b": "x=y", "c&d": "&", "e": "5"}),
    ],
)
def test_parse_attr(api: ModuleType, attr: str, expected: dict[str, str]) -> None:
    assert api.parse_attr(attr) == expected


def test_records_and_iteration(api: ModuleType) -> None:
    b = api.InLongMsgBuilder(1, compress=False)
    b.add("groupId=g&streamId=s", b"one")
    b.add("groupId=g&streamId=t", b"two")
    b.add("groupId=g&streamId=s", b"three")
    m = api.decode(b.build(1))
    assert list(m) == [("groupId=g&streamId=s", b"one"), ("groupId=g&streamId=s", b"three"),
                       ("groupId=g&streamId=t", b"two")]
    recs = list(m.records())
    assert [(r["streamId"], body) for r, body in recs] == [("s", b"one"), ("s", b"three"), ("t", b"two")]
    recs[0][0]["streamId"] = "changed"
    assert recs[1][0]["streamId"] == "s"
    assert len(m) == 3
    assert "records=3" in repr(m)


def test_format_attr_round_trips(api: ModuleType) -> None:
    attrs = {"groupId": "g", "streamId": "s", "dt": "1700000000000"}
    assert api.parse_attr(api.format_attr(attrs)) == attrs
    with pytest.raises(ValueError):
        api.format_attr({"a&b": "1"})


@pytest.mark.parametrize("codec_name", ["codec.compiled", "codec.python"])
def test_message_inlongmsg(api: ModuleType, codec_name: str) -> None:
    import importlib

    from .conftest import NO_EXT

    if NO_EXT and codec_name == "codec.compiled":
        pytest.skip("TUBEMQ_NO_EXTENSIONS=1")
    codec = importlib.import_module(f"tubemq.{codec_name}")
    b = api.InLongMsgBuilder(1)
    b.add("groupId=g&streamId=s", b"payload")
    msg = codec.Message("topic", b.build(1))
    assert msg.inlongmsg().bodies("groupId=g&streamId=s") == [b"payload"]
    assert api.decode_message(msg).attrs == ("groupId=g&streamId=s",)
    with pytest.raises(InLongMsgError):
        codec.Message("topic", b"plain text").inlongmsg()


def test_most_compressible_snappy_is_within_the_bound(api: ModuleType) -> None:
    """4 MB of zeros: the densest valid snappy (21.3x) still decodes under the 22x bound."""
    b = api.InLongMsgBuilder(1, compress=True, capacity=1 << 30)
    b.add("a=1", bytes(4_000_000))
    data = b.build(1)
    assert len(data) * 20 < 4_000_000
    assert api.decode(data).bodies("a=1") == [bytes(4_000_000)]


def test_v2_duplicate_attr_replaces_data_keeps_place(api: ModuleType) -> None:
    """Java's LinkedHashMap: a repeated attr on the wire replaces the earlier group's data, same position."""
    def group(attr: bytes, cnt: int, payload: bytes) -> bytes:
        return len(attr).to_bytes(2, "big") + attr + cnt.to_bytes(4, "big") + (len(payload) + 1).to_bytes(
            4, "big") + b"\x00" + payload

    data = (b"\x0f\x02" + (9).to_bytes(8, "big") + (3).to_bytes(4, "big") + (3).to_bytes(4, "big")
            + group(b"a=1", 1, _item(b"old")) + group(b"b=2", 1, _item(b"bee")) + group(b"a=1", 1, _item(b"new"))
            + b"\x0f\x02")
    m = api.decode(data)
    assert m.attrs == ("a=1", "b=2") and m.bodies("a=1") == [b"new"] and m.attr_count == 3
