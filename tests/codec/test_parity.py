"""The Cython codec and the pure-Python twin agree on random and malformed input (same result or same error)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tubemq.codec import python as py
from tubemq.codec._twin.datatypes import MESSAGE_FIELDS
from tubemq.errors import DecodeError
from tubemq.protocol import broker_pb

from .conftest import NO_EXT

pytestmark = pytest.mark.skipif(NO_EXT, reason="TUBEMQ_NO_EXTENSIONS=1: no Cython codec to compare with")
if not NO_EXT:
    from tubemq.codec import compiled as cy
else:  # pragma: no cover
    cy = py

PARITY = settings(max_examples=300, deadline=None)


def _norm(value: Any) -> Any:
    """Messages of the two implementations are different classes: compare their attributes."""
    if isinstance(value, (py.Message, cy.Message)):
        return ("Message",) + tuple(_norm(getattr(value, a)) for a in MESSAGE_FIELDS)
    if isinstance(value, tuple):
        return type(value).__name__, tuple(_norm(v) for v in value)
    if isinstance(value, list):
        return [_norm(v) for v in value]
    return value


def _outcome(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    try:
        return "ok", _norm(fn(*args, **kwargs))
    except Exception as exc:  # noqa: BLE001 - the exception type is what we compare
        return "error", type(exc)


def same(name: str, *args: Any, **kwargs: Any) -> None:
    a = _outcome(getattr(py, name), *args, **kwargs)
    b = _outcome(getattr(cy, name), *args, **kwargs)
    assert a == b


def _transfered(mid: int, payload: bytes, flag: int, good_crc: bool) -> bytes:
    crc = py.crc32(payload) if good_crc else (py.crc32(payload) + 1) & 0x7FFFFFFF
    return py.encode_transfered_message(mid, crc, payload, flag)


fields_strategy = st.lists(
    st.tuples(st.integers(1, 12), st.sampled_from([0, 2]), st.integers(-(2**63), 2**64 - 1), st.binary(max_size=40)),
    max_size=12,
)


def _pb(fields: list[tuple[int, int, int, bytes]]) -> bytes:
    out = b""
    for num, wt, v, blob in fields:
        if wt == 0:
            out += py._f_varint(num, v)
        else:
            out += py._f_bytes(num, blob)
    return out


@PARITY
@given(fields=fields_strategy, junk=st.binary(max_size=30))
def test_flat_decoders(fields: list[tuple[int, int, int, bytes]], junk: bytes) -> None:
    body = _pb(fields)
    for data in (body, junk, body + junk, body[: len(body) // 2]):
        same("decode_send_response", data)
        same("decode_get_message_response", data, "t")
        same("decode_response", data)
        same("decode_request", data)


@PARITY
@given(
    messages=st.lists(
        st.tuples(st.integers(-(2**63), 2**63 - 1), st.binary(max_size=60), st.integers(0, 3), st.booleans(),
                  st.one_of(st.none(), st.text(max_size=20))),
        max_size=6,
    ),
    curr=st.integers(-5, 2**40),
    verify=st.booleans(),
)
def test_get_message_response(messages: list[tuple[int, bytes, int, bool, str | None]], curr: int, verify: bool) -> None:
    raws = []
    for mid, data, flag, good, attrs in messages:
        payload = py.encode_payload(data, attrs) if attrs is not None and flag & 1 else data
        raws.append(_transfered(mid, payload, flag, good))
    body = (
        broker_pb.GetMessageResponseB2C(success=True, errCode=200, errMsg="OK!", currOffset=curr,
                                        maxOffset=curr + 1000).SerializeToString()
        + py.wrap_repeated(4, raws)
    )
    assert cy.wrap_repeated(4, raws) == py.wrap_repeated(4, raws)
    p = py.Partition(1, "h", 1, "t", 0)
    same("decode_get_message_response", body, "t", p, verify)


@PARITY
@given(data=st.binary(max_size=80), flag=st.integers(0, 3), attrs=st.text(max_size=30))
def test_payloads(data: bytes, flag: int, attrs: str) -> None:
    same("decode_payload", data, flag)
    same("encode_payload", data, attrs)
    same("payload_flag", attrs)
    same("decode_attributes", attrs)
    same("put_system_header", attrs, attrs[:3], attrs[-3:])
    same("crc32", data)
    if flag & 1:
        payload = py.encode_payload(data, attrs)
        same("decode_payload", payload, flag)
        same("decode_message", py.RawMessage(1, py.crc32(payload), payload, flag), "t", None, 5)


ALPHABET = "0123456789:#, a-+_٣"


@PARITY
@given(infos=st.lists(st.text(alphabet=ALPHABET, max_size=25), max_size=5))
def test_topic_info_strings(infos: list[str]) -> None:
    brokers = {1: py.BrokerInfo(1, "h1", 8123), 2: py.BrokerInfo(2, "h2", 8125)}
    # keep the expansion small: a random string could ask for 10^9 partitions
    infos = [i for i in infos if all(len(x) < 3 for x in i.replace("#", ":").replace(",", ":").split(":"))]
    same("parse_topic_info", infos, brokers)
    same("parse_topic_meta_info", infos, brokers)
    for s in infos:
        same("parse_broker_info", s)
        same("parse_partition", s)
        same("parse_subscribe_info", s)


def test_topic_info_canonical_and_odd() -> None:
    brokers = {1: py.BrokerInfo(1, "h1", 8123), 2: py.BrokerInfo(2, "h2", 8125)}
    cases = [
        ["t#1:2:3#100"], ["t#1:2:3# 100"], ["t# 1:2:3"], ["t#1:+2:3"], ["t#1:2:3,,2:1:1#"], ["t#1:2"],
        ["#1:1:1"], ["t"], ["t#1:1:1#x"], ["t#1:1:1#5#6"], ["t#1:-1:1"], ["t#1:1:1:1"], ["t#9:1:1#7"],
        ["t#0001:1:1"], ["t#1:1:1#" + "9" * 30], ["тема#1:2:1"], ["t#1_0:1:1"],
        # the C scanner's edges: more items than its stack buffer, NUL inside, 18 and 19 digit runs,
        # a size right after the topic, a third '#' with text after it, an item cut by the size
        ["t#" + ",".join(f"{1 + i % 3}:1:1" for i in range(40)) + "#9"], ["t#1:1:1\x00#5"], ["t#1:1:\x00"],
        ["t#1:1:1#" + "9" * 18], ["t#1:1:1#" + "9" * 19], ["t#" + "0" * 18 + "1:1:1"], ["t##5"],
        ["t#1:1:1#5#junk#"], ["t#1:1#5"], ["t#1:1:1,#"], ["t#1:1:1,2:1:1:"], ["t#,,,"],
        # max sizes of every length, ended by the text's end, a '#', or a character that is not a digit
        *([f"t#1:1:1#{'7' * k}{end}"] for k in range(0, 21) for end in ("", "#", "#x", "x", "\x00", ":1")),
    ]
    for infos in cases:
        same("parse_topic_info", infos, brokers)
    # a Mapping that is not a dict, and broker objects that are not BrokerInfo
    from types import MappingProxyType, SimpleNamespace

    same("parse_topic_info", ["t#1:2:1"], MappingProxyType(brokers))
    same("parse_topic_info", ["t#1:2:1"], {1: SimpleNamespace(host="x", port=1)})


@PARITY
@given(text=st.text(max_size=40))
def test_java_hash_and_ip(text: str) -> None:
    same("java_hash", text)
    same("ip_to_int", text)


@PARITY
@given(st.lists(st.tuples(st.text(max_size=8), st.text(max_size=8)), max_size=5))
def test_encode_attributes(items: list[tuple[str, str]]) -> None:
    same("encode_attributes", dict(items))


@PARITY
@given(
    serial=st.integers(-(2**40), 2**40),
    method=st.integers(-(2**31), 2**31 - 1),
    body=st.binary(max_size=20000),
    name=st.text(max_size=30),
    msg=st.text(max_size=30),
    status=st.integers(0, 2),
    pv=st.one_of(st.none(), st.integers(0, 5)),
)
def test_encoders(serial: int, method: int, body: bytes, name: str, msg: str, status: int, pv: int | None) -> None:
    same("encode_frame", serial, body)
    same("encode_request", serial, 2, method, body, timeout_ms=5)
    same("encode_response", serial, method, body)
    same("encode_error_response", serial, name, msg, status=status, protocol_ver=pv)
    same("encode_transfered_message", serial, method, body, status)


@PARITY
@given(fields=fields_strategy, junk=st.binary(max_size=30), status=st.sampled_from([0, 1, 500]),
       key=st.one_of(st.none(), st.text(max_size=5)))
def test_send_result_decoders(fields: list[tuple[int, int, int, bytes]], junk: bytes, status: int,
                              key: str | None) -> None:
    """decode_send_result (the blocking send reads every answer with it): the same result, None or
    error on well-formed answers, refusals, error statuses and damaged payloads."""
    from tubemq.types import SendResult

    if status:
        frame = py.encode_error_response(7, "org.apache.E", "refused", status=status)
    else:
        frame = py.encode_response(7, 2, _pb(fields))
    ((_, payload),) = py.FrameDecoder().feed(frame)
    part = py.Partition(1, "127.0.0.1", 8123, "t", 0)
    for data in (payload, payload + junk, payload[: len(payload) // 2], junk):
        same("decode_send_result", data, SendResult, "t", part, key)
    ok = broker_pb.SendMessageResponseB2P(success=True, errCode=200, errMsg="OK", messageId=5, appendTime=6,
                                          appendOffset=7).SerializeToString()
    ((_, payload),) = py.FrameDecoder().feed(py.encode_response(7, 2, ok))
    r = cy.decode_send_result(payload + junk, SendResult, "t", part, key)
    assert type(r) is SendResult and r == ("t", part, 5, 6, 7, key)


def test_unknown_wire_types_and_bad_varints() -> None:
    for data in (b"\x0b", b"\x0c", b"\x00\x01", b"\x08" + b"\xff" * 11, b"\x08\xff", b"\x12\x05ab",
                 b"\x09" + b"\x01" * 7, b"\x0d\x01", b"\x09" + b"\x01" * 8 + b"\x10\x01\x1a\x00"):
        same("decode_send_response", data)
        same("decode_get_message_response", data, "t")
    assert _outcome(cy.decode_send_response, b"\x0b") == ("error", DecodeError)


def test_big_random_payloads_match() -> None:
    data = os.urandom(300_000)
    same("crc32", data)
    same("encode_frame", 1, data)
    same("encode_payload", data, "k=v")
