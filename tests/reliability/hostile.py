"""Hostile TubeMQ peers on 127.0.0.1 for the reliability suite: masters and brokers that misbehave.

A :class:`HostilePeer` runs its own event loop on a thread (so blocking and asyncio clients can both
face it). Without ``upstream`` it is a fake server that reads request frames and answers each one the
way ``mode`` says; with ``upstream`` it is a proxy in front of a real (embedded) server that forwards
faithfully in mode ``"pass"`` and turns hostile, mid-connection, when ``mode`` changes. Modes:

``silent``    accepts and reads, never answers
``half``      half of a legal answer frame, then nothing
``stall``     the header of a large legal frame and some of its body, then nothing (stalled mid-frame)
``garbage``   seeded random bytes
``oversized`` a frame header announcing more blocks than any legal frame has
``token``     a frame with a wrong begin token
``close``     half of a legal answer, then the connection is closed
"""

from __future__ import annotations

import asyncio
import random
import struct
import threading
from typing import Any

from tubemq import codec
from tubemq.protocol.constants import BEGIN_TOKEN
from tubemq.server import wire

MODES = ("silent", "half", "stall", "garbage", "oversized", "token", "close")
_HEADER = struct.Struct(">III")


def hostile_bytes(mode: str, serial: int, legal: bytes, rng: random.Random) -> tuple[bytes, bool]:
    """(bytes to write, close afterwards) for one answer in ``mode``; ``legal`` is a legal answer."""
    if mode == "half":
        return legal[: max(1, len(legal) // 2)], False
    if mode == "stall":
        blocks = 2000  # legal (<= 3584 blocks of 8 KiB) but far more than is ever sent
        return _HEADER.pack(BEGIN_TOKEN, serial, blocks) + struct.pack(">I", 8192) + b"\0" * 4096, False
    if mode == "garbage":
        return bytes(rng.getrandbits(8) for _ in range(512)), False
    if mode == "oversized":
        return _HEADER.pack(BEGIN_TOKEN, serial, 1 << 30), False
    if mode == "token":
        return b"\x12\x34\x56\x78" + legal[4:], False
    if mode == "close":
        return legal[: max(1, len(legal) // 2)], True
    return b"", False  # silent


class HostilePeer:
    """See the module docstring. ``with HostilePeer("silent") as peer: ... peer.address``."""

    def __init__(self, mode: str = "silent", *, upstream: str | None = None, seed: int = 7) -> None:
        if mode not in MODES + ("pass",):
            raise ValueError(f"unknown mode {mode!r}")
        self.mode = mode
        self.upstream = upstream
        self.rng = random.Random(seed)
        self.connections = 0
        self.requests = 0
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.AbstractServer | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._thread = threading.Thread(target=self._loop.run_forever, name="hostile-peer", daemon=True)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> HostilePeer:
        self._thread.start()
        fut = asyncio.run_coroutine_threadsafe(self._start(), self._loop)
        fut.result(10)
        return self

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    def stop(self) -> None:
        async def stop() -> None:
            if self._server is not None:
                self._server.close()
            for w in list(self._writers):
                w.transport.abort()
            await asyncio.sleep(0)

        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
        self._loop.close()

    def __enter__(self) -> HostilePeer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.add(writer)
        try:
            if self.upstream is not None:
                await self._proxy(reader, writer)
            else:
                await self._fake(reader, writer)
        except (ConnectionError, asyncio.CancelledError, asyncio.IncompleteReadError):
            pass
        finally:
            self._writers.discard(writer)
            writer.transport.abort()

    async def _fake(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        dec = codec.FrameDecoder()
        while True:
            data = await reader.read(65536)
            if not data:
                return
            for serial, payload in dec.feed(data):
                self.requests += 1
                req = wire.decode_request(payload)
                legal = wire.encode_response(serial, req.method, b"\x08\x01" * 40)
                out, close = hostile_bytes(self.mode, serial, legal, self.rng)
                if out:
                    writer.write(out)
                    await writer.drain()
                if close:
                    return

    async def _proxy(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        assert self.upstream is not None
        host, port = self.upstream.rsplit(":", 1)
        up_reader, up_writer = await asyncio.open_connection(host, int(port))
        self._writers.add(up_writer)

        async def forward_requests() -> None:
            while data := await reader.read(65536):
                self.requests += 1
                up_writer.write(data)

        async def forward_answers() -> None:
            spoiled = False
            while data := await up_reader.read(65536):
                mode = self.mode
                if mode == "pass":
                    writer.write(data)
                    continue
                if spoiled:
                    continue  # after the hostile bytes: silence (or the connection is gone)
                serial = _HEADER.unpack_from(data)[1] if len(data) >= 12 else 0
                out, close = hostile_bytes(mode, serial, data, self.rng)
                spoiled = mode != "garbage"
                if out:
                    writer.write(out)
                if close:
                    writer.transport.abort()
                    return

        try:
            tasks = [asyncio.ensure_future(forward_requests()), asyncio.ensure_future(forward_answers())]
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for t in tasks:
                t.cancel()
        finally:
            self._writers.discard(up_writer)
            up_writer.transport.abort()


def redirect_broker(cluster: Any, address: str) -> None:
    """Make the embedded master advertise its broker at ``address`` (a :class:`HostilePeer` proxy)."""
    cluster.advertise_broker(None, address)
