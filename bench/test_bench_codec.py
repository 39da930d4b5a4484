"""Codec micro-benchmarks: Cython vs the pure-Python twin, with a plain memory-copy baseline.

Run: ``python -m pytest bench/test_bench_codec.py --benchmark-enable`` (results: bench/RESULTS.md, "Codec").
Each group holds the same operation for every implementation, so pytest-benchmark's table shows ratios.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

from tubemq.codec import python as _codec_py
from tubemq.protocol import broker_pb

NO_EXT = os.environ.get("TUBEMQ_NO_EXTENSIONS", "") not in ("", "0")
IMPLS = ["cython", "python"]


def _impl(name: str) -> ModuleType:
    if name == "python":
        return _codec_py
    if NO_EXT:
        pytest.skip("TUBEMQ_NO_EXTENSIONS=1")
    from tubemq.codec import compiled as _codec

    return _codec


def _data(n: int) -> bytes:
    return bytes(i % 251 for i in range(n))


CLIENT_ID = "10.0.0.5-4242-1700000000000000-777-py-0.1.0"
ATTRS = "$msgType$=order,$msgTime$=202401021530,region=sh"


# ---------------------------------------------------------------------------------------------- framing


@pytest.mark.parametrize("size", [300, 8192, 65536], ids=["300B", "8KiB", "64KiB"])
@pytest.mark.parametrize("name", IMPLS + ["memcpy"])
def test_frame_encode(benchmark: Any, name: str, size: int) -> None:
    benchmark.group = f"frame encode {size} B"
    payload = _data(size)
    if name == "memcpy":
        source = bytearray(payload)
        benchmark(bytes, source)  # one allocation + one copy of the same size
        return
    impl = _impl(name)
    frame = benchmark(impl.encode_frame, 7, payload)
    assert len(frame) == 12 + 4 * max(1, -(-size // 8192)) + size


def _chunked_stream(impl: ModuleType, frames: int, size: int, chunk: int) -> list[bytes]:
    stream = b"".join(impl.encode_frame(i, _data(size)) for i in range(frames))
    return [stream[i : i + chunk] for i in range(0, len(stream), chunk)]


def _feed_all(dec: Any, chunks: list[bytes]) -> int:
    """Feed every chunk to ``dec``; the number of frames it gave back."""
    n = 0
    for c in chunks:
        n += len(dec.feed(c))
    return n


def _copy_chunks(benchmark: Any, chunks: list[bytes]) -> None:
    """The memcpy baseline of a chunked decode: one allocation + one copy per chunk."""
    sources = [bytearray(c) for c in chunks]
    benchmark(lambda: [bytes(s) for s in sources])


@pytest.mark.parametrize("name", IMPLS + ["memcpy"])
def test_frame_decode_100x300B_in_4KiB_chunks(benchmark: Any, name: str) -> None:
    benchmark.group = "frame decode 100 x 300 B, 4 KiB chunks"
    chunks = _chunked_stream(_codec_py, 100, 300, 4096)
    if name == "memcpy":
        _copy_chunks(benchmark, chunks)
        return
    impl = _impl(name)
    assert benchmark(lambda: _feed_all(impl.FrameDecoder(), chunks)) == 100


@pytest.mark.parametrize("name", IMPLS + ["memcpy"])
def test_frame_decode_64KiB(benchmark: Any, name: str) -> None:
    benchmark.group = "frame decode 64 KiB"
    frame = _codec_py.encode_frame(1, _data(65536))
    if name == "memcpy":
        benchmark(bytes, bytearray(_data(65536)))
        return
    impl = _impl(name)
    out = benchmark(lambda: impl.FrameDecoder().feed(frame))
    assert len(out[0][1]) == 65536


@pytest.mark.parametrize("name", IMPLS + ["memcpy"])
def test_frame_decode_8x350KB_in_64KiB_chunks(benchmark: Any, name: str) -> None:
    """One decoder (one connection) receiving getMessage-sized frames: 8 x ~350 KB, 64 KiB reads."""
    benchmark.group = "frame decode 8 x 350 KB, 64 KiB chunks"
    chunks = _chunked_stream(_codec_py, 8, 350_000, 65536)
    if name == "memcpy":
        _copy_chunks(benchmark, chunks)
        return
    impl = _impl(name)
    dec = impl.FrameDecoder()
    assert benchmark(lambda: _feed_all(dec, chunks)) == 8
    assert dec.buffered == 0


# ---------------------------------------------------------------------------------------------- payloads


@pytest.mark.parametrize("attrs", ["text", "mapping"])
@pytest.mark.parametrize("name", IMPLS)
def test_attribute_payload_encode(benchmark: Any, name: str, attrs: str) -> None:
    benchmark.group = f"attribute payload encode (100 B, attributes as {attrs})"
    impl = _impl(name)
    value: Any = ATTRS if attrs == "text" else {"$msgType$": "order", "$msgTime$": "202401021530", "region": "sh"}
    data = _data(100)
    out = benchmark(impl.encode_payload, data, value)
    assert out.endswith(data)


@pytest.mark.parametrize("name", IMPLS)
def test_topic_info_parse_1000(benchmark: Any, name: str) -> None:
    benchmark.group = "topicInfo parse: 1000 strings, 1000 partitions"
    impl = _impl(name)
    brokers = {b: _codec_py.BrokerInfo(b, f"10.0.0.{b}", 8123) for b in range(1, 11)}
    infos = [f"topic-{i:04d}#{i % 10 + 1}:1:1#1048576" for i in range(1000)]
    partitions, sizes = benchmark(impl.parse_topic_info, infos, brokers)
    assert len(partitions) == 1000 and len(sizes) == 1000


# ---------------------------------------------------------------------------------------------- send path


def _send_args(size: int) -> tuple[Any, ...]:
    data = _codec_py.encode_payload(_data(size), ATTRS) if size == 100 else _data(size)
    return (1, CLIENT_ID, "demo", 3, data, 1 if size == 100 else 0, 167772165, 1700000000123)


def _send_via_protobuf(impl: ModuleType) -> Callable[..., bytes]:
    def build(serial: int, client_id: str, topic: str, pid: int, data: bytes, flag: int, addr: int,
              token: int) -> bytes:
        req = broker_pb.SendMessageRequestP2B(
            clientId=client_id, topicName=topic, partitionId=pid, data=data, flag=flag, checkSum=-1,
            sentAddr=addr, authInfo=broker_pb.AuthorizedInfo(visitAuthorizedToken=token),
        )
        return impl.encode_request(serial, 3, 13, req.SerializeToString(), timeout_ms=10000)

    return build


@pytest.mark.parametrize("size", [100, 10000], ids=["100B+attrs", "10KB"])
@pytest.mark.parametrize("name", IMPLS + ["protobuf+cython"])
def test_encode_send_request(benchmark: Any, name: str, size: int) -> None:
    benchmark.group = f"send request encode {size} B"
    args = _send_args(size)
    if name == "protobuf+cython":
        fn = _send_via_protobuf(_impl("cython"))
    else:
        fn = _impl(name).encode_send_request
    frame = benchmark(fn, *args)
    assert frame == _codec_py.encode_send_request(*args)


@pytest.mark.parametrize("name", IMPLS)
def test_decode_send_response(benchmark: Any, name: str) -> None:
    benchmark.group = "send response decode"
    impl = _impl(name)
    body = broker_pb.SendMessageResponseB2P(
        success=True, errCode=200, errMsg="3520836758341632001", requireAuth=False,
        messageId=3520836758341632001, appendTime=1700000001234, appendOffset=280,
    ).SerializeToString()
    r = benchmark(impl.decode_send_response, body)
    assert r.message_id == 3520836758341632001


def _get_message_body(count: int, attrs: bool) -> bytes:
    raws = []
    for i in range(count):
        payload = _codec_py.encode_payload(_data(100), ATTRS if attrs else None)
        raws.append(_codec_py.encode_transfered_message(3520836758341632001 + i, _codec_py.crc32(payload), payload,
                                                        1 if attrs else 0))
    head = broker_pb.GetMessageResponseB2C(
        success=True, errCode=200, errMsg="OK!", currOffset=280, minLimitTime=0, escFlowCtrl=False,
        currDataDlt=0, requireSlow=False, maxOffset=280 + 28 * count,
    ).SerializeToString()
    return head + _codec_py.wrap_repeated(4, raws)


@pytest.mark.parametrize("attrs", [False, True], ids=["plain", "attrs"])
@pytest.mark.parametrize("count", [1, 100])
@pytest.mark.parametrize("name", IMPLS)
def test_decode_get_message_response(benchmark: Any, name: str, count: int, attrs: bool) -> None:
    benchmark.group = f"getMessage decode {count} x 100 B ({'with' if attrs else 'no'} attributes)"
    impl = _impl(name)
    body = _get_message_body(count, attrs)
    p = _codec_py.Partition(1, "10.0.0.1", 8123, "demo", 0)
    r = benchmark(impl.decode_get_message_response, body, "demo", p)
    assert len(r.messages) == count and r.dropped == 0


# ---------------------------------------------------------------------------------------------- instruction counts


def _decode_case(name: str) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """The Cython call and arguments of one decode benchmark above, for running it under valgrind."""
    from tubemq.codec import compiled as _codec

    if name == "send_response":
        body = broker_pb.SendMessageResponseB2P(
            success=True, errCode=200, errMsg="3520836758341632001", requireAuth=False,
            messageId=3520836758341632001, appendTime=1700000001234, appendOffset=280,
        ).SerializeToString()
        return _codec.decode_send_response, (body,)
    if name.startswith("get_message-"):  # get_message-<count>-<plain|attrs>
        _, count, kind = name.split("-")
        p = _codec_py.Partition(1, "10.0.0.1", 8123, "demo", 0)
        return _codec.decode_get_message_response, (_get_message_body(int(count), kind == "attrs"), "demo", p)
    if name == "topic_info":
        brokers = {b: _codec_py.BrokerInfo(b, f"10.0.0.{b}", 8123) for b in range(1, 11)}
        return _codec.parse_topic_info, ([f"topic-{i:04d}#{i % 10 + 1}:1:1#1048576" for i in range(1000)], brokers)
    raise SystemExit(f"unknown case {name!r}")


def _run(fn: Callable[..., Any], args: tuple[Any, ...], n: int) -> None:
    for _ in range(n):
        fn(*args)


def _round_spread(fn: Callable[..., Any], args: tuple[Any, ...], calls: int, rounds: int) -> str:
    """Per-call ns of ``rounds`` rounds of ``calls`` warm calls: min and percentiles (is the spread bimodal?)."""
    import time

    def one() -> float:
        t0 = time.perf_counter()
        _run(fn, args, calls)
        return (time.perf_counter() - t0) / calls * 1e9

    for _ in range(rounds // 2):
        one()
    xs = sorted(one() for _ in range(rounds))
    return " ".join(f"p{q}={xs[min(len(xs) - 1, len(xs) * q // 100)]:.0f}" for q in (0, 10, 25, 50, 75, 90))


if __name__ == "__main__":
    # Instructions per call, deterministic (unlike timings on a shared machine): run a case N1 and N2
    # times under cachegrind with PYTHONHASHSEED=0 and divide the difference of the totals by N2 - N1
    # (bench/RESULTS.md, "Decode targets of issue 12"). With a third argument R: print the spread of R
    # timed rounds of N calls instead.
    import sys

    case, calls = sys.argv[1], int(sys.argv[2])
    f, a = _decode_case(case)
    if len(sys.argv) > 3:
        print(case, "ns per call:", _round_spread(f, a, calls, int(sys.argv[3])))
    else:
        _run(f, a, 5)  # first calls (caches, freelists) outside the difference
        _run(f, a, calls)
