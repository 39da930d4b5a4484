"""FrameDecoder and memory: a large frame cut across reads (a consumer's ~0.5 MB getMessage answer)
comes out as a sound ``bytes``, and decoding a stream of them does not map and fault in fresh memory
for every frame (issue 12: that cost a consumer 0.3 - 0.5 ms per frame)."""

from __future__ import annotations

import ctypes
import os
import pathlib
import subprocess
import sys
from types import ModuleType

import pytest

import tubemq

BLOCK = 8192


def _java_payload(blocks: int, last: int, seed: int) -> bytes:
    """A payload that the Java layout cuts into ``blocks`` blocks, the last one ``last`` bytes long."""
    return bytes((seed + i * 7) & 0xFF for i in range(256)) * ((BLOCK * (blocks - 1) + last) // 256 + 1)


def _feed_in_three(dec: object, frame: bytes) -> list[tuple[int, bytes]]:
    view = memoryview(frame)
    k = len(frame) // 3
    out: list[tuple[int, bytes]] = []
    for part in (view[:k], view[k:2 * k], view[2 * k:]):
        out += dec.feed(part)  # type: ignore[attr-defined]
    return out


@pytest.mark.parametrize("blocks,last", [(2, 1), (65, 1), (65, 100), (65, 8191), (65, BLOCK), (130, 4000)])
def test_assembled_large_payload_is_a_sound_bytes(impl: ModuleType, blocks: int, last: int) -> None:
    payload = _java_payload(blocks, last, blocks + last)[: BLOCK * (blocks - 1) + last]
    frame = impl.encode_frame(7, payload)
    assert int.from_bytes(frame[8:12], "big") == blocks
    dec = impl.FrameDecoder()
    (serial, got), = _feed_in_three(dec, frame)
    assert serial == 7
    assert type(got) is bytes and len(got) == len(payload) and got == payload
    assert hash(got) == hash(bytes(bytearray(payload)))
    assert got[-1:] == payload[-1:] and got + b"" == payload
    assert dec.buffered == 0
    if impl.implementation == "cython":
        # CPython's bytes invariant: a NUL right after the last byte (C code parsing bytes relies on it)
        header = bytes.__basicsize__ - 1
        assert ctypes.string_at(id(got) + header + len(got), 1) == b"\0"


_FAULTS_PER_FRAME = """
import os, resource, sys
impl = sys.argv[1]
if impl == "cython":
    from tubemq.codec import compiled as codec
else:
    from tubemq.codec import python as codec
payloads = [os.urandom(520_000 + 1000 * i) for i in range(3)]  # 64 - 65 blocks of 8 KiB
frames = [codec.encode_frame(i + 1, p) for i, p in enumerate(payloads)]
dec = codec.FrameDecoder()
held = [None, None, None]  # three answers alive at a time, as with three fetches in flight

def run(n):
    for i in range(n):
        view = memoryview(frames[i % 3])
        k = len(view) // 3
        for part in (view[:k], view[k:2 * k], view[2 * k:]):
            for serial, payload in dec.feed(part):
                assert len(payload) == len(payloads[serial - 1])
                held[i % 3] = payload

run(10)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
run(60)
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 60)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc malloc's mmap threshold: Linux only")
def test_large_frames_across_reads_do_not_fault_in_fresh_memory() -> None:
    """A fresh process (the malloc state of this one is whatever earlier tests left) decodes 0.5 MB
    frames in three reads each; before the fix every frame was a fresh mmap: ~128 page faults.

    The bound is the Cython decoder's: the twin copies every read into a bytearray it trims (~30 faults
    per frame from glibc's heap trimming, measured and left alone; it is the ~10x slower fallback)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES"}
    # the tubemq this test runs against (in place in a checkout, site-packages after pip install)
    env["PYTHONPATH"] = str(pathlib.Path(tubemq.__file__).resolve().parents[1])
    env.pop("TUBEMQ_NO_EXTENSIONS", None)
    out = subprocess.run([sys.executable, "-c", _FAULTS_PER_FRAME, "cython"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    faults = float(out.stdout)
    assert faults < 16, f"{faults} page faults per 0.5 MB frame: its result is mapped afresh every time"
