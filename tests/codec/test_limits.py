"""Hostile metadata is refused before it is built; edge inputs where the codecs once disagreed."""

from __future__ import annotations

import tracemalloc
from types import ModuleType

import pytest

from tubemq.codec import python as _codec_py
from tubemq.codec.python import _varint
from tubemq.errors import DecodeError
from tubemq.protocol import broker_pb

BROKERS = {1: _codec_py.BrokerInfo(1, "10.0.0.1", 8123), 2: _codec_py.BrokerInfo(2, "10.0.0.2", 8123)}


@pytest.mark.parametrize("text", ["t#1:999:999", "t#1:10001:1", "t#1:1:10001", "t#1:0:99999999999",
                                  "t#1:5000:1,2:5001:1", "t#1:100:60,1:100:41"])
def test_topic_info_over_the_cap_is_refused(impl: ModuleType, text: str) -> None:
    with pytest.raises(DecodeError, match="max_partitions|over the limit"):
        impl.parse_topic_info([text], BROKERS)


def test_topic_info_cap_is_checked_before_allocating(impl: ModuleType) -> None:
    tracemalloc.start()
    try:
        for text in ("t#1:999:999", "t#1:999999999999999999:999999999999999999", "t#1:99999999:99999999#5"):
            with pytest.raises(DecodeError):
                impl.parse_topic_info([text], BROKERS)
            with pytest.raises(DecodeError):
                impl.parse_topic_meta_info([text + ":1"], BROKERS)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000


def test_topic_info_limits_are_settable(impl: ModuleType) -> None:
    parts, _ = impl.parse_topic_info(["t#1:100:3"], BROKERS, max_partitions=300)
    assert len(parts) == 300
    with pytest.raises(DecodeError):
        impl.parse_topic_info(["t#1:100:3"], BROKERS, max_partitions=299)
    infos = [f"t{i}#1:10:1" for i in range(10)]
    assert len(impl.parse_topic_info(infos, BROKERS, max_total_partitions=100)[0]) == 100
    with pytest.raises(DecodeError, match="max_total_partitions"):
        impl.parse_topic_info(infos + ["u#2:1:1"], BROKERS, max_total_partitions=100)
    assert impl.parse_topic_info(["t#1:10000:1"], BROKERS)[0][-1].partition_id == 9999


def test_the_cap_counts_a_topic_over_all_its_entries(impl: ModuleType) -> None:
    infos = ["t#1:6000:1", "u#2:6000:1"]
    assert len(impl.parse_topic_info(infos, BROKERS)[0]) == 12000
    with pytest.raises(DecodeError, match="'t'.*max_partitions"):
        impl.parse_topic_info(infos + ["t#2:4001:1"], BROKERS)
    assert len(impl.parse_topic_info(infos + ["t#2:4000:1"], BROKERS)[0]) == 16000
    metas = ["t#1:1:6000:1", "u#2:1:6000:1", "t#2:1:4001:1"]
    with pytest.raises(DecodeError, match="'t'"):
        impl.parse_topic_meta_info(metas, BROKERS)


def test_unknown_brokers_and_empty_entries_cost_nothing(impl: ModuleType) -> None:
    parts, _ = impl.parse_topic_info(["t#9:999:999", "t#1:0:5", "t#1:5:0"], BROKERS)
    assert parts == []


def test_topic_meta_info_caps_and_typed_errors(impl: ModuleType) -> None:
    assert len(impl.parse_topic_meta_info(["t#1:2:3:1"], BROKERS)) == 6
    with pytest.raises(DecodeError):
        impl.parse_topic_meta_info(["t#1:999:999:1"], BROKERS)
    for bad in ("t#1:x:1:1", "t#1:1:1:", "t#a:1:1:1", "t#1:1:1:1:1"):
        with pytest.raises(DecodeError):
            impl.parse_topic_meta_info([bad], BROKERS)


# ---- the disagreements issue 11.5 found, now pinned on both codecs


def test_varint_over_64_bits_is_a_decode_error(impl: ModuleType) -> None:
    body = b"\x08" + _varint(2**64) + b"\x10\xc8\x01\x1a\x02OK"
    with pytest.raises(DecodeError, match="64 bits"):
        impl.decode_send_response(body)
    longest = b"\x08" + _varint(2**64 - 1) + b"\x10\xc8\x01\x1a\x02OK"
    assert impl.decode_send_response(longest).success is True
    eleven = b"\x08" + b"\x80" * 10 + b"\x00" + b"\x10\xc8\x01\x1a\x02OK"
    with pytest.raises(DecodeError):
        impl.decode_send_response(eleven)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("3520836758341632001", 3520836758341632001), ("+12", 12), ("-12", -12), ("9223372036854775807", 2**63 - 1),
     ("9223372036854775808", -1), ("-9223372036854775809", -1), (" 12", -1), ("1_2", -1), ("", -1), ("OK!", -1),
     ("+", -1), ("\u0661\u0662", 12)],
)
def test_message_id_from_err_msg_follows_java_parse_long(impl: ModuleType, text: str, expected: int) -> None:
    body = broker_pb.SendMessageResponseB2P(success=True, errCode=200, errMsg=text).SerializeToString()
    assert impl.decode_send_response(body).message_id == expected


def test_offsets_near_int64_max_do_not_wrap(impl: ModuleType) -> None:
    """The batch's start is kept as sent; no per-message offset is made up from it (None)."""
    payload = b"x" * 10
    tm = impl.encode_transfered_message(1, impl.crc32(payload), payload, 0)
    head = broker_pb.GetMessageResponseB2C(success=True, errCode=200, currOffset=2**63 - 30).SerializeToString()
    body = head + impl.wrap_repeated(4, [tm, tm, tm])
    for verify in (True, False):
        r = impl.decode_get_message_response(body, "t", None, verify)
        assert r.curr_offset == 2**63 - 30 and [m.offset for m in r.messages] == [None, None, None]
