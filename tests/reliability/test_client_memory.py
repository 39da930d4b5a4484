"""Issue 11.4: a dead connection's buffers are freed when it dies, not when the cycle collector runs.

A master streams most of a legal 28 MiB answer frame and then drops the connection, five times; with
the cycle collector disabled the traced memory must return to its baseline, no protocol object (256 KiB
read buffer, link to the transport) may stay alive, and a Connection still named by a held exception's
traceback must hold no partial frame.
"""

from __future__ import annotations

import asyncio
import gc
import tracemalloc

import pytest

from tubemq import aio
from tubemq.errors import TubeMQError
from tubemq.net.connection import Connection, _Protocol
from tubemq.server import wire

#: a legal frame: 3580 blocks of 8 KiB is just under the 3584-block limit (§1.3)
BIG = wire.encode_response(1, 1, b"x" * (3580 * 8192 - 256))
ATTEMPTS = 5


def _live() -> tuple[list[Connection], int]:
    objs = gc.get_objects()
    return [o for o in objs if isinstance(o, Connection)], sum(1 for o in objs if isinstance(o, _Protocol))


async def _master_streaming_big_frames() -> tuple[asyncio.AbstractServer, str]:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.read(65536)
            writer.write(BIG[: len(BIG) - 1000])  # all but the end: the client buffers ~28 MiB
            await writer.drain()
            await asyncio.sleep(0.05)
        except ConnectionError:
            pass
        finally:
            writer.transport.abort()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    return server, f"127.0.0.1:{server.sockets[0].getsockname()[1]}"


def test_failed_attempts_free_partial_frames_without_gc() -> None:
    async def body() -> tuple[int, list[Connection], int, list[BaseException]]:
        server, address = await _master_streaming_big_frames()
        errors: list[BaseException] = []
        gc.collect()
        gc.disable()
        try:
            base = tracemalloc.get_traced_memory()[0]
            for _ in range(ATTEMPTS):
                producer = aio.Producer(address, rpc_timeout_ms=3000, register_retry_wait_ms=1, pool="private")
                try:
                    await producer.start()
                except TubeMQError as exc:
                    errors.append(exc)  # kept on purpose: a held exception must not hold the frame
                await producer.close()
            await asyncio.sleep(0.2)
            grown = tracemalloc.get_traced_memory()[0] - base
            conns, protocols = _live()
        finally:
            gc.enable()
            server.close()
        return grown, conns, protocols, errors

    tracemalloc.start()
    try:
        grown, conns, protocols, errors = asyncio.run(asyncio.wait_for(body(), 120))
    finally:
        tracemalloc.stop()
    assert len(errors) == ATTEMPTS, "every attempt must fail with a TubeMQError"
    assert protocols == 0, f"{protocols} protocol object(s) of dead connections still alive"
    # exceptions (held here, or by clients awaiting the cycle collector) name their connection through
    # traceback frames: such a connection must be an empty shell
    for conn in conns:
        assert conn.closed and conn._decoder.buffered == 0 and conn._transport is None, conn
    assert grown < 8 * 2**20, f"traced memory grew by {grown / 2**20:.1f} MiB over {ATTEMPTS} failed attempts"


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__, "-q"])
