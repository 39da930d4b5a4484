"""A tiny real TCP server speaking TubeMQ framing, for net/producer tests that need scripted answers.

Imported by tests/net/conftest.py and tests/producer/conftest.py (fixtures ``frame_server`` and ``run``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from tubemq import codec
from tubemq.server import wire

#: handler(request, serial) -> frames to send back (list of bytes) or None (no answer)
Handler = Callable[[codec.Request, int], Awaitable[list[bytes] | None] | list[bytes] | None]


class FrameServer:
    """Accepts connections on 127.0.0.1, decodes request frames and answers through ``handler``."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests: list[tuple[int, codec.Request]] = []
        self.reads = 0
        self.connections = 0
        self.writers: list[asyncio.StreamWriter] = []
        self.server: asyncio.AbstractServer | None = None
        self.address = ""

    async def start(self) -> FrameServer:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        self.address = f"127.0.0.1:{port}"
        return self

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.writers.append(writer)
        dec = codec.FrameDecoder()
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                self.reads += 1
                for serial, payload in dec.feed(data):
                    req = wire.decode_request(payload)
                    self.requests.append((serial, req))
                    out = self.handler(req, serial)
                    if asyncio.iscoroutine(out):
                        asyncio.get_running_loop().create_task(self._answer_later(out, writer))
                        continue
                    for frame in out or ():
                        writer.write(frame)
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def _answer_later(self, coro: Any, writer: asyncio.StreamWriter) -> None:
        out = await coro
        if not writer.is_closing():
            for frame in out or ():
                writer.write(frame)

    async def drop_clients(self) -> None:
        for w in self.writers:
            w.transport.abort()
        self.writers.clear()

    async def close(self) -> None:
        await self.drop_clients()
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()


def echo(req: codec.Request, serial: int) -> list[bytes]:
    """Answer with the request body reversed, method echoed."""
    return [wire.encode_response(serial, req.method, req.body[::-1])]


@pytest.fixture
def frame_server() -> Callable[[Handler], Awaitable[FrameServer]]:
    servers: list[FrameServer] = []

    async def make(handler: Handler = echo) -> FrameServer:
        s = await FrameServer(handler).start()
        servers.append(s)
        return s

    return make


def _run(coro: Awaitable[Any], timeout: float = 20.0) -> Any:
    """Run a test coroutine with a hard deadline."""

    async def main() -> Any:
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(main())


@pytest.fixture
def run() -> Callable[..., Any]:
    return _run
