"""The twin's framing (docs/PROTOCOL.md §1): encode_frame and the streaming FrameDecoder."""

from __future__ import annotations

import struct
from typing import Any

from ...errors import FrameError
from ...protocol.constants import BEGIN_TOKEN, MAX_BLOCK_SIZE, MAX_FRAME_SIZE, MAX_LIST_SIZE

DEFAULT_MAX_FRAME_SIZE = MAX_FRAME_SIZE

_HEADER = struct.Struct(">III")
_U32 = struct.Struct(">I")


def _frame_into(out: bytearray, serial: int, payload: Any) -> None:
    view = memoryview(payload).cast("B")
    n = len(view)
    blocks = max(1, -(-n // MAX_BLOCK_SIZE))
    out += _HEADER.pack(BEGIN_TOKEN, serial & 0xFFFFFFFF, blocks)
    if n == 0:
        out += _U32.pack(0)
        return
    for start in range(0, n, MAX_BLOCK_SIZE):
        chunk = view[start : start + MAX_BLOCK_SIZE]
        out += _U32.pack(len(chunk))
        out += chunk


def encode_frame(serial: int, payload: Any) -> bytes:
    """Frame ``payload`` as token + serial + block list, Java layout (8192-byte blocks)."""
    out = bytearray()
    _frame_into(out, serial, payload)
    return bytes(out)


class FrameDecoder:
    """Streaming frame decoder: feed bytes cut anywhere, get ``(serial, payload)`` tuples back.

    Raises :class:`FrameError` on a bad begin token, a zero or oversized block count, or a frame
    above ``max_frame_size``; after that every call raises again (the stream is unusable).
    """

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE, max_blocks: int = MAX_LIST_SIZE) -> None:
        if max_frame_size <= 0 or max_blocks <= 0:
            raise ValueError("max_frame_size and max_blocks must be positive")
        self.max_frame_size = max_frame_size
        self.max_blocks = max_blocks
        self._buf = bytearray()
        self._pos = 0
        self._error: str | None = None
        # state of the frame being assembled
        self._serial = -1
        self._blocks_left = 0
        self._payload = bytearray()

    @property
    def failed(self) -> bool:
        return self._error is not None

    @property
    def buffered(self) -> int:
        """Bytes held for the incomplete frame (bounded by ``max_frame_size`` + 12)."""
        return len(self._buf) - self._pos + len(self._payload)

    def _fail(self, reason: str) -> FrameError:
        self._error = reason
        self._buf = bytearray()
        self._payload = bytearray()
        self._pos = 0
        return FrameError(reason)

    def feed(self, data: Any) -> list[tuple[int, bytes]]:
        if self._error is not None:
            raise FrameError(f"decoder failed earlier: {self._error}")
        self._buf += data
        out: list[tuple[int, bytes]] = []
        buf = self._buf
        pos = self._pos
        end = len(buf)
        while True:
            if self._serial < 0:
                if end - pos < 12:
                    break
                token, serial, blocks = _HEADER.unpack_from(buf, pos)
                if token != BEGIN_TOKEN:
                    raise self._fail(f"bad begin token 0x{token:08x}")
                if blocks == 0:
                    raise self._fail("frame with an empty block list")
                if blocks > self.max_blocks:
                    raise self._fail(f"block count {blocks} over the limit {self.max_blocks}")
                pos += 12
                self._serial = serial
                self._blocks_left = blocks
            while self._blocks_left:
                if end - pos < 4:
                    break
                (length,) = _U32.unpack_from(buf, pos)
                if length > self.max_frame_size or len(self._payload) + length > self.max_frame_size:
                    raise self._fail(f"frame size over the limit {self.max_frame_size}")
                if end - pos - 4 < length:
                    break
                self._payload += buf[pos + 4 : pos + 4 + length]
                pos += 4 + length
                self._blocks_left -= 1
            if self._blocks_left:
                break
            out.append((self._serial, bytes(self._payload)))
            self._payload = bytearray()
            self._serial = -1
        if pos:
            del buf[:pos]
            pos = 0
        self._pos = pos
        return out
