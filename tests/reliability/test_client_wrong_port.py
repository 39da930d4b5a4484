"""Issue 14.3 / 11.10: a client pointed at the admin HTTP port, or a plaintext client at a TLS port,
fails at once with a FrameError that says what the port is, instead of hanging until timeouts."""

from __future__ import annotations

import asyncio
import ssl
import subprocess
import time
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

import tubemq
from tubemq.errors import ConnectionLostError, FrameError, NotTubeMQPortError
from tubemq.net.connection import Connection

#: a long RPC timeout, so "it did not wait for one" is told apart with a generous limit on a loaded machine
OPTIONS: dict[str, Any] = {"rpc_timeout_ms": 30000, "pool": "private"}


def _admin_address(cluster: Any) -> str:
    u = urllib.parse.urlparse(cluster.admin_url)
    return f"{u.hostname}:{u.port}"


@pytest.mark.parametrize("make", [
    lambda m: tubemq.Producer(m, **OPTIONS),
    lambda m: tubemq.Consumer(m, group="g_http", topics=["t"], **OPTIONS),
], ids=["Producer", "Consumer"])
def test_admin_http_port_gives_a_quick_frame_error(cluster: Any, make: Any) -> None:
    address = _admin_address(cluster)
    t0 = time.monotonic()
    with pytest.raises(FrameError) as info:
        make(address)
    took = time.monotonic() - t0
    assert isinstance(info.value, NotTubeMQPortError)
    assert address in str(info.value) and "this looks like an HTTP port" in str(info.value)
    print(f"refused after {took:.2f} s")
    assert took < 15, f"took {took:.1f} s (one RPC timeout is 30 s: it must not wait for one)"


def test_http_answer_detected_on_the_first_bytes() -> None:
    """A peer answering HTTP before any request arrives is refused just as fast (raw Connection)."""

    async def body() -> None:
        async def serve(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            w.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
            await asyncio.sleep(5)

        srv = await asyncio.start_server(serve, "127.0.0.1", 0)
        address = f"127.0.0.1:{srv.sockets[0].getsockname()[1]}"
        conn = await Connection.open(address)
        with pytest.raises(NotTubeMQPortError, match="HTTP port"):
            await conn.call(1, 1, b"", timeout_ms=3000)
        with pytest.raises(NotTubeMQPortError):  # the connection stays failed with the same reason
            await conn.call(1, 1, b"", timeout_ms=3000)
        srv.close()

    asyncio.run(asyncio.wait_for(body(), 10))


def _self_signed(tmp: Path) -> tuple[str, str]:
    cert, key = tmp / "c.pem", tmp / "k.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
                    "-out", str(cert), "-days", "2", "-subj", "/CN=127.0.0.1"],
                   check=True, capture_output=True)
    return str(cert), str(key)


def test_plaintext_client_at_a_tls_port_is_told_tls(tmp_path: Path) -> None:
    """An OpenSSL server (asyncio's too) drops the plaintext client without an alert: the connection
    error must still say TLS, at once."""
    cert, key = _self_signed(tmp_path)

    async def body() -> None:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(cert, key)

        async def serve(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            await asyncio.sleep(60)

        srv = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=ctx)
        address = f"127.0.0.1:{srv.sockets[0].getsockname()[1]}"
        conn = await Connection.open(address)
        t0 = time.monotonic()
        with pytest.raises(ConnectionLostError, match="TLS"):
            await conn.call(1, 1, b"", timeout_ms=30000)
        took = time.monotonic() - t0
        print(f"told TLS after {took:.2f} s")
        assert took < 15  # at once, not after the 30 s RPC timeout (a generous limit for loaded machines)
        srv.close()

    asyncio.run(asyncio.wait_for(body(), 60))


@pytest.mark.parametrize("record", [b"\x15\x03\x03\x00\x02\x02\x0a", b"\x16\x03\x03\x00\x04\x0e\x00\x00\x00"],
                         ids=["alert", "handshake"])
def test_tls_record_answer_says_tls(record: bytes) -> None:
    """A TLS server that answers with a record (Java's SSLEngine sends an alert) -> NotTubeMQPortError."""

    async def body() -> None:
        async def serve(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            await r.read(100)
            w.write(record)
            await asyncio.sleep(5)

        srv = await asyncio.start_server(serve, "127.0.0.1", 0)
        address = f"127.0.0.1:{srv.sockets[0].getsockname()[1]}"
        conn = await Connection.open(address)
        with pytest.raises(NotTubeMQPortError, match="TLS") as info:
            await conn.call(1, 1, b"", timeout_ms=3000)
        assert address in str(info.value)
        srv.close()

    asyncio.run(asyncio.wait_for(body(), 10))
