"""Seeded parity fuzz of every decoder on both codecs (issue 11.5).

Each decoder gets mutated valid encodings and random input from a fixed seed; the Cython core and the
pure-Python twin must give the same result or raise the same exception type, and every exception must
be a ``TubeMQError`` (never an untyped ``ValueError``, ``OverflowError``, ``IndexError``...). Bounded:
a few thousand inputs per decoder, seconds in all. ``bench/soak.py`` is the long version.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import pytest

from tubemq.codec import python as py
from tubemq.codec._twin.datatypes import MESSAGE_FIELDS
from tubemq.errors import TubeMQError
from tubemq.protocol import broker_pb

NO_EXT = os.environ.get("TUBEMQ_NO_EXTENSIONS", "") not in ("", "0")
CODECS: list[ModuleType] = [py]
if not NO_EXT:
    from tubemq.codec import compiled as cy  # an ImportError here is a real failure

    CODECS.append(cy)

SEED = 20261123
ROUNDS = int(os.environ.get("TUBEMQ_FUZZ_ROUNDS", "1500"))
BROKERS = {1: py.BrokerInfo(1, "10.0.0.1", 8123), 2: py.BrokerInfo(2, "h2", 8124), 7: py.BrokerInfo(7, "h7", 1)}


#: exact types (a set lookup is the cheapest test); a subclass takes the longer way, to the same result
_SCALARS = frozenset({int, bool, str, bytes, float, type(None)})


def _norm(value: Any) -> Any:
    """A value both codecs' results can be compared by (their classes differ); scalars are themselves.
    (Topic infos hold thousands of partitions: scalars, most of the values, are passed without a call.)"""
    if type(value) in _SCALARS:
        return value
    if hasattr(value, "attributes") and hasattr(value, "offset") and hasattr(value, "data"):
        return ("Message",) + tuple([_norm(getattr(value, a)) for a in MESSAGE_FIELDS])
    if isinstance(value, tuple):
        return type(value).__name__, tuple([v if type(v) in _SCALARS else _norm(v) for v in value])
    if isinstance(value, list):
        return [v if type(v) in _SCALARS else _norm(v) for v in value]
    if isinstance(value, dict):
        return {k: _norm(v) for k, v in value.items()}
    return value


def _outcome(fn: Callable[[], Any]) -> Any:
    try:
        return "ok", _norm(fn())
    except TubeMQError as exc:
        return "error", type(exc).__name__
    except Exception as exc:  # noqa: BLE001 - an untyped error is the failure being looked for
        return "untyped", f"{type(exc).__name__}: {exc}"


# ---------------------------------------------------------------------------------------------- inputs


def _mutate(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.random()
        if op < 0.3 and b:
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        elif op < 0.45 and b:
            b[rng.randrange(len(b))] = rng.choice([0x00, 0x7F, 0x80, 0xFF, 0x01, 0x02])
        elif op < 0.6:
            del b[rng.randrange(len(b) + 1):]
        elif op < 0.75:
            i = rng.randrange(len(b) + 1)
            b[i:i] = rng.choice([b"\xff" * 10 + b"\x01", b"\x80" * 9 + b"\x02", b"\x08", b"\x22\x7f", b"\x25", b"\x0b"])
        elif op < 0.9 and b:
            i = rng.randrange(len(b))
            b[i:i] = b[i : i + rng.randint(1, 8)]
        else:
            b += rng.randbytes(rng.randint(1, 12))
    return bytes(b)


def _big_int(rng: random.Random) -> int:
    return rng.choice([0, 1, -1, 2**31 - 1, -(2**31), 2**63 - 1, -(2**63), 2**63 - 28, rng.getrandbits(64) - 2**63])


def _send_response(rng: random.Random) -> bytes:
    kw: dict[str, Any] = {"success": rng.random() < 0.7, "errCode": rng.choice([200, 419, 500, -1]),
                          "errMsg": rng.choice(["OK!", "", "123", "9223372036854775808", "-5", "x" * 30, "٠١"])}
    if rng.random() < 0.5:
        kw["messageId"] = _big_int(rng)
    if rng.random() < 0.5:
        kw["appendOffset"] = _big_int(rng)
    return broker_pb.SendMessageResponseB2P(**kw).SerializeToString()


def _payload(rng: random.Random) -> tuple[bytes, int]:
    data = rng.randbytes(rng.randint(0, 40))
    if rng.random() < 0.5:
        attrs = rng.choice(["$msgType$=a,k=v", "a=b=c,,=x,k", "é=ü", "", "k"])
        return py.encode_payload(data, attrs), 1
    return data, rng.choice([0, 0, 1, 2, 3])


def _get_message_response(rng: random.Random) -> bytes:
    raws = []
    for i in range(rng.randint(0, 4)):
        payload, flag = _payload(rng)
        crc = py.crc32(payload) if rng.random() < 0.8 else 5
        raws.append(py.encode_transfered_message(_big_int(rng) if i == 0 else i, crc, payload, flag))
    head = broker_pb.GetMessageResponseB2C(
        success=rng.random() < 0.8, errCode=200, errMsg=rng.choice(["OK!", ""]),
        currOffset=rng.choice([-1, 0, 280, 2**63 - 29, 2**63 - 1]), maxOffset=_big_int(rng),
    ).SerializeToString()
    return head + py.wrap_repeated(4, raws)


def _response_payload(rng: random.Random) -> bytes:
    if rng.random() < 0.5:
        frame = py.encode_response(1, rng.randint(1, 22), rng.randbytes(rng.randint(0, 20)))
    else:
        frame = py.encode_error_response(1, "java.lang.Exception", "boom", status=rng.choice([1, 2]))
    return py.FrameDecoder().feed(frame)[0][1]


def _request_payload(rng: random.Random) -> bytes:
    frame = py.encode_request(1, rng.randint(1, 5), rng.randint(1, 22), rng.randbytes(rng.randint(0, 20)),
                              timeout_ms=rng.choice([1, 10000, 2**40]))
    return py.FrameDecoder().feed(frame)[0][1]


_ALPHABET = "#:,@=0123456789 -+abt٠\u00e9_"


def _meta_text(rng: random.Random, valid: str) -> str:
    if rng.random() < 0.4:
        return "".join(rng.choice(_ALPHABET) for _ in range(rng.randint(0, 24)))
    chars = list(valid)
    for _ in range(rng.randint(0, 3)):
        i = rng.randrange(len(chars) + 1)
        chars.insert(i, rng.choice(_ALPHABET))
    if chars and rng.random() < 0.3:
        del chars[rng.randrange(len(chars))]
    return "".join(chars)


def _topic_info(rng: random.Random) -> list[str]:
    valid = rng.choice(["t#1:3:2#1048576", "topic-a#1:1:1,2:2:1", "t#7:1:1,9:2:2#", "t#1:100:100#5",
                        "t#1:2:9999", "t#1:10000:1"])
    return [_meta_text(rng, valid) for _ in range(rng.randint(1, 3))]


def _topic_meta_info(rng: random.Random) -> list[str]:
    valid = rng.choice(["t#1:2:3:1", "t#1:1:1:0,2:2:1:1", "t#1:100:100:1", "t#7:99999:1:1"])
    return [_meta_text(rng, valid) for _ in range(rng.randint(1, 3))]


# ---------------------------------------------------------------------------------------------- cases


def _cases(rng: random.Random) -> Iterator[tuple[str, Callable[[ModuleType], Any]]]:
    send = _mutate(rng, _send_response(rng)) if rng.random() < 0.8 else _send_response(rng)
    yield "decode_send_response", lambda c: c.decode_send_response(send)
    get = _mutate(rng, _get_message_response(rng)) if rng.random() < 0.8 else _get_message_response(rng)
    verify = rng.random() < 0.7
    yield "decode_get_message_response", lambda c: c.decode_get_message_response(get, "t", None, verify)
    rsp = _mutate(rng, _response_payload(rng))
    yield "decode_response", lambda c: c.decode_response(rsp)
    req = _mutate(rng, _request_payload(rng))
    yield "decode_request", lambda c: c.decode_request(req)
    payload, flag = _payload(rng)
    payload = _mutate(rng, payload) if rng.random() < 0.5 else payload
    yield "decode_payload", lambda c: c.decode_payload(payload, flag)
    raw = py.RawMessage(_big_int(rng), py.crc32(payload) if rng.random() < 0.7 else -1, payload, flag)
    offset = _big_int(rng)
    yield "decode_message", lambda c: c.decode_message(raw, "t", None, offset)
    text = _meta_text(rng, "a=b,$msgType$=x,c")
    yield "decode_attributes", lambda c: c.decode_attributes(text)
    frames = _mutate(rng, py.encode_frame(rng.getrandbits(32), rng.randbytes(rng.randint(0, 300))))
    cut = rng.randint(0, len(frames))
    yield "FrameDecoder", lambda c: _feed(c, frames, cut)
    infos = _topic_info(rng)
    yield "parse_topic_info", lambda c: c.parse_topic_info(infos, BROKERS)
    metas = _topic_meta_info(rng)
    yield "parse_topic_meta_info", lambda c: c.parse_topic_meta_info(metas, BROKERS)
    broker = _meta_text(rng, "1:10.0.0.1:8123")
    yield "parse_broker_info", lambda c: c.parse_broker_info(broker)
    part = _meta_text(rng, "1:10.0.0.1:8123#t:3")
    yield "parse_partition", lambda c: c.parse_partition(part)
    sub = _meta_text(rng, "c1@g#1:h:8123#t:3")
    yield "parse_subscribe_info", lambda c: c.parse_subscribe_info(sub)


def _feed(codec: ModuleType, data: bytes, cut: int) -> list[Any]:
    dec = codec.FrameDecoder(max_frame_size=4096)
    return dec.feed(data[:cut]) + dec.feed(data[cut:])


def test_every_decoder_agrees_and_raises_only_typed_errors() -> None:
    rng = random.Random(SEED)
    tried: dict[str, int] = {}
    failures: list[str] = []
    for _ in range(ROUNDS):
        for name, call in _cases(rng):
            tried[name] = tried.get(name, 0) + 1
            results = [_outcome(lambda c=c, call=call: call(c)) for c in CODECS]
            for codec, result in zip(CODECS, results, strict=True):
                if result[0] == "untyped":
                    failures.append(f"{codec.implementation} {name}: {result[1]}")
            if len(results) == 2 and results[0] != results[1]:
                failures.append(f"{name}: twin {results[0]!r:.300} != cython {results[1]!r:.300}")
            if len(failures) > 10:
                break
    assert not failures, "\n".join(failures[:10])
    assert len(tried) == 13 and min(tried.values()) == ROUNDS


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.implementation)
def test_fuzzed_topic_info_memory_is_bounded(codec: ModuleType) -> None:
    """Hostile partition counts are refused before they are built (issue 11.3)."""
    import tracemalloc

    rng = random.Random(SEED + 1)
    tracemalloc.start()
    try:
        for _ in range(300):
            n = [str(rng.choice([rng.randint(0, 10**6), 10**17, 999])) for _ in range(2)]
            text = f"t#1:{n[0]}:{n[1]}"
            try:
                codec.parse_topic_info([text], BROKERS)
                codec.parse_topic_meta_info([text + ":1"], BROKERS)
            except TubeMQError:
                pass
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8_000_000  # at most one topic at the 10,000-partition cap is ever alive
