"""Frame encoding/decoding: hypothesis round trips with random chunking, and bad input."""

from __future__ import annotations

import os
import random
import struct
from types import ModuleType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tubemq.errors import FrameError
from tubemq.protocol.constants import BEGIN_TOKEN, MAX_BLOCK_SIZE, MAX_LIST_SIZE

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
TOKEN = struct.pack(">I", BEGIN_TOKEN)


def _payload(size: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(size)


def _chunks(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    out, prev = [], 0
    for p in points + [len(data)]:
        out.append(data[prev:p])
        prev = p
    return out


def _feed_all(dec, pieces) -> list[tuple[int, bytes]]:  # type: ignore[no-untyped-def]
    out = []
    for piece in pieces:
        out += dec.feed(piece)
    return out


def _header(serial: int, blocks: int) -> bytes:
    return struct.pack(">III", BEGIN_TOKEN, serial, blocks)


@SETTINGS
@given(
    sizes=st.lists(st.integers(0, 200 * 1024), min_size=1, max_size=4),
    seed=st.integers(0, 2**32),
    cuts=st.lists(st.integers(0, 2**31), max_size=40),
    serial=st.integers(0, 2**32 - 1),
    kind=st.sampled_from([bytes, bytearray, memoryview]),
)
def test_round_trip_random_chunking(impl: ModuleType, sizes, seed, cuts, serial, kind) -> None:  # type: ignore[no-untyped-def]
    payloads = [_payload(n, seed + i) for i, n in enumerate(sizes)]
    stream = b"".join(impl.encode_frame(serial + i, kind(p)) for i, p in enumerate(payloads))
    dec = impl.FrameDecoder()
    got = _feed_all(dec, [kind(c) for c in _chunks(stream, cuts)])
    assert got == [((serial + i) & 0xFFFFFFFF, p) for i, p in enumerate(payloads)]
    assert dec.buffered == 0 and not dec.failed


@SETTINGS
@given(size=st.integers(0, 70 * 1024), seed=st.integers(0, 2**32))
def test_frame_layout(impl: ModuleType, size: int, seed: int) -> None:
    payload = _payload(size, seed)
    frame = impl.encode_frame(3, payload)
    token, serial, blocks = struct.unpack_from(">III", frame)
    assert (token, serial) == (BEGIN_TOKEN, 3)
    assert blocks == max(1, -(-size // MAX_BLOCK_SIZE))
    assert len(frame) == 12 + 4 * blocks + size
    assert frame == impl.encode_frame(3, bytearray(payload)) == impl.encode_frame(3, memoryview(payload))


def test_byte_by_byte(impl: ModuleType) -> None:
    frames = [impl.encode_frame(i, _payload(n, i)) for i, n in enumerate((0, 1, 300, 8192, 8193, 17000))]
    stream = b"".join(frames)
    dec = impl.FrameDecoder()
    got = []
    for i in range(len(stream)):
        got += dec.feed(stream[i : i + 1])
    assert [s for s, _ in got] == list(range(6))
    assert [len(p) for _, p in got] == [0, 1, 300, 8192, 8193, 17000]


def test_serial_wraps_to_uint32(impl: ModuleType) -> None:
    assert impl.encode_frame(-1, b"x")[4:8] == b"\xff\xff\xff\xff"
    assert impl.encode_frame(2**32 + 5, b"x")[4:8] == b"\x00\x00\x00\x05"
    assert impl.encode_frame(2**70 + 6, b"x")[4:8] == b"\x00\x00\x00\x06"
    with pytest.raises(TypeError):
        impl.encode_frame("1", b"x")
    with pytest.raises(TypeError):
        impl.encode_frame(1, "text")


def test_decoder_accepts_non_java_block_layouts(impl: ModuleType) -> None:
    """Receivers must not rely on block boundaries (docs/PROTOCOL.md §1.3): small, odd and empty blocks."""
    blocks = [b"ab", b"", b"c" * 9000, b"d"]
    frame = _header(9, len(blocks)) + b"".join(struct.pack(">I", len(b)) + b for b in blocks)
    assert impl.FrameDecoder().feed(frame) == [(9, b"".join(blocks))]


@pytest.mark.parametrize(
    "sizes",
    [[20000, 70000, 5], [100] * 40, [0, 0, 8192, 0], [8192] * 43 + [6000]],
    ids=["blocks-above-8KiB", "small-blocks", "empty-blocks", "getmessage-350KB"],
)
def test_decoder_chunked_blocks_larger_or_smaller_than_java(impl: ModuleType, sizes: list[int]) -> None:
    """A frame cut into reads is assembled right whatever its block sizes (the decoder may size its
    buffer from the header's block count assuming 8 KiB blocks; that guess must never matter)."""
    blocks = [_payload(n, i) for i, n in enumerate(sizes)]
    frame = _header(5, len(blocks)) + b"".join(struct.pack(">I", len(b)) + b for b in blocks)
    stream = frame * 3
    for step in (1000, 4096, 65536):
        dec = impl.FrameDecoder()
        got = _feed_all(dec, [stream[i : i + step] for i in range(0, len(stream), step)])
        assert got == [(5, b"".join(blocks))] * 3
        assert dec.buffered == 0 and not dec.failed


def test_truncated_frame_waits(impl: ModuleType) -> None:
    frame = impl.encode_frame(1, b"z" * 20000)
    dec = impl.FrameDecoder()
    for cut in (5, 12, 14, 16, 8000, len(frame) - 1):
        dec = impl.FrameDecoder()
        assert dec.feed(frame[:cut]) == []
        assert not dec.failed
        assert 0 <= dec.buffered <= cut
        assert dec.feed(frame[cut:]) == [(1, b"z" * 20000)]
        assert dec.buffered == 0
    assert impl.FrameDecoder().feed(b"") == []


@pytest.mark.parametrize(
    "bad, match",
    [
        (b"\x00\x00\x00\x00" + b"\x00" * 8, "bad begin token"),
        (b"GET / HTTP/1.1\r\n\r\n", "bad begin token"),
        (_header(1, 0) + b"\x00\x00\x00\x00", "empty block list"),
        (_header(1, MAX_LIST_SIZE + 1), "block count"),
        (_header(1, 0x80000000), "block count"),
        (_header(1, 0xFFFFFFFF), "block count"),
        (_header(1, 1) + b"\x80\x00\x00\x00", "frame size"),
        (_header(1, 1) + b"\xff\xff\xff\xff", "frame size"),
    ],
)
def test_bad_frames_fail_and_stay_failed(impl: ModuleType, bad: bytes, match: str) -> None:
    dec = impl.FrameDecoder()
    good = impl.encode_frame(1, b"ok")
    with pytest.raises(FrameError, match=match):
        dec.feed(good + bad)
    assert dec.failed
    assert dec.buffered == 0
    with pytest.raises(FrameError, match="failed earlier"):
        dec.feed(good)


def test_bad_frame_split_across_feeds(impl: ModuleType) -> None:
    dec = impl.FrameDecoder()
    assert dec.feed(_header(1, 2)[:7]) == []
    with pytest.raises(FrameError):
        dec.feed(_header(1, 2)[7:] + struct.pack(">I", 100) + b"x" * 100 + b"\x7f\xff\xff\xff")
    assert dec.failed


def test_max_frame_size(impl: ModuleType) -> None:
    dec = impl.FrameDecoder(max_frame_size=10000)
    assert dec.feed(impl.encode_frame(1, b"a" * 10000)) == [(1, b"a" * 10000)]
    # 2 blocks that together exceed the cap: rejected as soon as the second length is seen
    frame = impl.encode_frame(2, b"b" * 10001)
    with pytest.raises(FrameError, match="frame size over the limit 10000"):
        for i in range(0, len(frame), 100):
            dec.feed(frame[i : i + 100])
    assert dec.failed


def test_max_blocks(impl: ModuleType) -> None:
    dec = impl.FrameDecoder(max_blocks=2)
    assert dec.feed(impl.encode_frame(1, b"a" * 16384))[0][0] == 1
    with pytest.raises(FrameError, match="block count 3 over the limit 2"):
        dec.feed(impl.encode_frame(2, b"a" * 16385))


@pytest.mark.parametrize("kwargs", [{"max_frame_size": 0}, {"max_blocks": 0}, {"max_frame_size": -1}])
def test_bad_limits(impl: ModuleType, kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        impl.FrameDecoder(**kwargs)


def test_random_garbage_fails_fast_with_bounded_memory(impl: ModuleType) -> None:
    """10 MB of random bytes: FrameError (almost always at once), never an unbounded buffer."""
    cap = 1024 * 1024
    bound = cap + 12 + 4 * MAX_LIST_SIZE
    rng = random.Random(1234)
    garbage = rng.randbytes(10 * 1024 * 1024)
    dec = impl.FrameDecoder(max_frame_size=cap)
    with pytest.raises(FrameError):
        for i in range(0, len(garbage), 65536):
            dec.feed(garbage[i : i + 65536])
            assert dec.buffered <= bound
    # garbage that starts with a valid token and header: still bounded, then rejected
    dec = impl.FrameDecoder(max_frame_size=cap)
    with pytest.raises(FrameError):
        dec.feed(_header(1, 3) + struct.pack(">I", cap) + os.urandom(cap // 2))
        assert dec.buffered <= bound
        for i in range(0, len(garbage), 65536):
            dec.feed(garbage[i : i + 65536])
            assert dec.buffered <= bound
    assert dec.failed and dec.buffered == 0


def test_buffered_is_bounded_while_assembling(impl: ModuleType) -> None:
    cap = 100_000
    dec = impl.FrameDecoder(max_frame_size=cap)
    frame = impl.encode_frame(1, b"q" * cap)
    for i in range(0, len(frame) - 1, 999):
        out = dec.feed(frame[i : min(i + 999, len(frame) - 1)])
        assert out == []
        assert dec.buffered <= cap + 12 + 4 * MAX_LIST_SIZE
    assert dec.feed(frame[-1:]) == [(1, b"q" * cap)]
    assert dec.buffered == 0
