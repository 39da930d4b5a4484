"""Connection: serial matching, pipelining, batched writes, timeouts, back-pressure, errors."""

from __future__ import annotations

import asyncio
import time

import pytest

from tubemq import codec
from tubemq.errors import (
    ConnectionLostError,
    RemoteError,
    StandbyError,
    TubeMQConnectionError,
    TubeMQTimeoutError,
)
from tubemq.net.connection import Connection, split_address
from tubemq.protocol.constants import EXC_STANDBY
from tubemq.server import wire


def test_split_address() -> None:
    assert split_address("127.0.0.1:8715") == ("127.0.0.1", 8715)
    assert split_address(" host:1 ") == ("host", 1)
    for bad in ("nohost", ":1", "h:", "h:0", "h:99999", "h:x"):
        with pytest.raises(TubeMQConnectionError):
            split_address(bad)


def test_call_roundtrip_and_request_shape(frame_server, run) -> None:
    async def main() -> None:
        srv = await frame_server()
        conn = await Connection.open(srv.address)
        assert await conn.call(1, 2, b"abc", timeout_ms=5000) == b"cba"
        serial, req = srv.requests[0]
        assert serial == 1
        assert (req.service_type, req.protocol_ver, req.method, req.timeout, req.body) == (1, 3, 2, 5000, b"abc")
        assert await conn.call(3, 13, b"", timeout_ms=5000) == b""
        assert srv.requests[1][0] == 2  # serials increase per connection
        with pytest.raises(ValueError):
            await conn.call(1, 2, b"x", timeout_ms=0)
        await conn.close()
        assert conn.closed
        with pytest.raises(TubeMQConnectionError):
            await conn.call(1, 2, b"x", timeout_ms=1000)
        await srv.close()

    run(main())


def test_out_of_order_answers_are_matched_by_serial(frame_server, run) -> None:
    held: list[tuple[int, codec.Request]] = []
    release = asyncio.Event()

    async def later(req: codec.Request, serial: int) -> list[bytes]:
        held.append((serial, req))
        await release.wait()
        return []

    def handler(req, serial):
        return later(req, serial)

    async def main() -> None:
        srv = await frame_server(handler)
        conn = await Connection.open(srv.address)
        calls = [asyncio.ensure_future(conn.call(1, 2, str(i).encode(), timeout_ms=10000)) for i in range(300)]
        deadline = time.monotonic() + 10
        while len(held) < 300 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert len(held) == 300
        # answer in reverse order, all in one write
        writer = srv.writers[0]
        writer.write(b"".join(wire.encode_response(s, r.method, r.body + b"!") for s, r in reversed(held)))
        results = await asyncio.gather(*calls)
        assert results == [str(i).encode() + b"!" for i in range(300)]
        release.set()
        await conn.close()
        await srv.close()

    run(main())


def test_pipelined_requests_are_written_in_one_batch(frame_server, run) -> None:
    async def main() -> None:
        srv = await frame_server()
        conn = await Connection.open(srv.address)
        writes: list[int] = []
        transport = conn._transport
        orig = transport.write

        def counting_write(data: bytes) -> None:
            writes.append(len(data))
            orig(data)

        transport.write = counting_write  # type: ignore[method-assign]
        calls = [conn.call(1, 2, b"x" * 10, timeout_ms=5000) for _ in range(200)]
        results = await asyncio.gather(*calls)
        assert results == [b"x" * 10] * 200
        assert len(writes) == 1, writes  # one syscall for the whole batch
        await conn.close()
        await srv.close()

    run(main())


def test_timeout_and_late_answer_ignored(frame_server, run) -> None:
    held: list[tuple[int, codec.Request]] = []

    def handler(req, serial):
        held.append((serial, req))
        return None  # never answers

    async def main() -> None:
        srv = await frame_server(handler)
        conn = await Connection.open(srv.address)
        t0 = time.monotonic()
        with pytest.raises(TubeMQTimeoutError):
            await conn.call(1, 2, b"x", timeout_ms=200)
        assert time.monotonic() - t0 < 5
        assert conn.inflight == 0
        # the late answer for the expired serial is ignored; the connection stays usable
        srv.writers[0].write(wire.encode_response(held[0][0], 2, b"late"))
        srv.handler = lambda req, serial: [wire.encode_response(serial, req.method, b"ok")]
        assert await conn.call(1, 2, b"y", timeout_ms=5000) == b"ok"
        assert not conn.closed
        await conn.close()
        await srv.close()

    run(main())


def test_remote_errors(frame_server, run) -> None:
    def handler(req, serial):
        if req.method == 1:
            return [wire.encode_error_response(serial, EXC_STANDBY, "not master now")]
        if req.method == 2:
            return [wire.encode_error_response(serial, "java.lang.Exception", "bad", status=2, protocol_ver=None)]
        return [wire.encode_error_response(serial, "java.lang.reflect.InvocationTargetException", "")]

    async def main() -> None:
        srv = await frame_server(handler)
        conn = await Connection.open(srv.address)
        with pytest.raises(StandbyError):
            await conn.call(1, 1, b"", timeout_ms=5000)
        with pytest.raises(RemoteError) as ei:
            await conn.call(1, 2, b"", timeout_ms=5000)
        assert ei.value.is_fatal and ei.value.message == "bad"
        with pytest.raises(RemoteError) as ei:
            await conn.call(1, 3, b"", timeout_ms=5000)
        assert not ei.value.is_fatal and not isinstance(ei.value, StandbyError)
        assert not conn.closed  # remote errors do not break the connection
        await conn.close()
        await srv.close()

    run(main())


def test_bad_frame_fails_all_pending_and_closes(frame_server, run) -> None:
    def handler(req, serial):
        if req.method == 9:
            return [b"GET / HTTP/1.1\r\n\r\n"]
        return None

    async def main() -> None:
        srv = await frame_server(handler)
        conn = await Connection.open(srv.address)
        closed: list[Connection] = []
        conn.on_close.append(closed.append)
        waiting = asyncio.ensure_future(conn.call(1, 2, b"", timeout_ms=10000))
        await asyncio.sleep(0.05)
        with pytest.raises(ConnectionLostError):
            await conn.call(1, 9, b"", timeout_ms=10000)
        with pytest.raises(ConnectionLostError):
            await waiting
        assert conn.closed and closed == [conn]
        await srv.close()

    run(main())


def test_peer_close_fails_pending(frame_server, run) -> None:
    async def main() -> None:
        srv = await frame_server(lambda req, serial: None)
        conn = await Connection.open(srv.address)
        pending = [asyncio.ensure_future(conn.call(1, 2, b"", timeout_ms=10000)) for _ in range(5)]
        deadline = time.monotonic() + 5
        while len(srv.requests) < 5 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        await srv.drop_clients()
        for p in pending:
            with pytest.raises(ConnectionLostError):
                await p
        assert conn.closed
        await srv.close()

    run(main())


def test_back_pressure_bounds_inflight(frame_server, run) -> None:
    held: list[tuple[int, codec.Request]] = []

    def handler(req, serial):
        held.append((serial, req))
        return None

    async def main() -> None:
        srv = await frame_server(handler)
        conn = await Connection.open(srv.address, max_inflight=4)
        calls = [asyncio.ensure_future(conn.call(1, 2, str(i).encode(), timeout_ms=10000)) for i in range(10)]
        await asyncio.sleep(0.2)
        assert conn.inflight == 4
        assert len(held) == 4  # the others wait on the client instead of being buffered
        for _ in range(10):
            assert len(held) <= 10
            batch, held[:] = list(held), []
            for s, r in batch:
                srv.writers[0].write(wire.encode_response(s, r.method, r.body))
            deadline = time.monotonic() + 5
            while not held and not all(c.done() for c in calls) and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            assert conn.inflight <= 4
            if all(c.done() for c in calls):
                break
        assert [await c for c in calls] == [str(i).encode() for i in range(10)]
        await conn.close()
        await srv.close()

    run(main())


def test_connect_errors(run) -> None:
    async def main() -> None:
        import socket

        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()  # nothing listens there now
        with pytest.raises(TubeMQConnectionError):
            await Connection.open(f"127.0.0.1:{port}", connect_timeout=2)
        with pytest.raises(TubeMQConnectionError):
            await Connection.open("not-an-address")

    run(main())


def test_large_frames_roundtrip(frame_server, run) -> None:
    async def main() -> None:
        srv = await frame_server()
        conn = await Connection.open(srv.address)
        body = bytes(range(256)) * 4096  # 1 MiB
        assert await conn.call(3, 13, body, timeout_ms=10000) == body[::-1]
        await conn.close()
        await srv.close()

    run(main())


def test_foreign_protocol_recognises_http_and_tls_but_never_a_frame() -> None:
    """The first bytes of an answer: a TubeMQ frame (0xFF...) is never mistaken for HTTP or TLS."""
    from tubemq.net.connection import foreign_protocol

    http = foreign_protocol("h:1", b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
    assert http is not None and "HTTP port" in str(http) and "h:1" in str(http) and "400 Bad Request" in str(http)
    assert foreign_protocol("h:1", b"HT") is not None  # a first read cut short still counts
    for first in (b"\x15\x03\x03\x00\x02\x02\x28", b"\x16\x03\x01\x00\x05"):
        tls = foreign_protocol("h:1", first)
        assert tls is not None and "TLS" in str(tls)
    assert foreign_protocol("h:1", wire.encode_response(1, 2, b"\x08\x01")) is None
    assert foreign_protocol("h:1", b"") is None
    assert foreign_protocol("h:1", b"HELLO") is None
