"""Issue 11.9: half-sent admin requests cannot refuse everyone else (header/body deadlines, eviction)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
from pathlib import Path

import pytest

from tubemq.server.admin import AdminApi, AdminServer
from tubemq.server.admin import server as admin_mod
from tubemq.server.config import ServerConfig
from tubemq.server.master import Master
from tubemq.server.meta import BrokerEntry, MetaStore

QUERY = b"GET /webapi.htm?type=op_query&method=admin_query_topic_info HTTP/1.1\r\n\r\n"


def _ask(port: int, timeout: float) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(QUERY)
        chunks = []
        while True:
            b = s.recv(65536)
            if not b:
                return b"".join(chunks)
            chunks.append(b)


def _run(tmp_path: Path, body: object) -> None:
    async def main() -> None:
        cfg = ServerConfig(data_dir=tmp_path)
        meta = MetaStore(tmp_path)
        meta.set_broker(BrokerEntry(1, "127.0.0.1", 8123))
        server = AdminServer(AdminApi(cfg, meta, Master(cfg, meta)), "127.0.0.1", 0)
        await server.start()
        try:
            await asyncio.wait_for(asyncio.to_thread(body, server.port), 60)  # type: ignore[arg-type]
        finally:
            await server.stop()

    asyncio.run(main())


def test_half_sent_requests_do_not_lock_out_others(tmp_path: Path) -> None:
    def body(port: int) -> None:
        slow: list[socket.socket] = []
        try:
            for i in range(admin_mod.MAX_ADMIN_CONNECTIONS):
                s = socket.create_connection(("127.0.0.1", port), timeout=2)
                s.sendall(b"POST /webapi.htm HTTP/1.1\r\nContent-Length: 100\r\n\r\n" if i % 2 else b"GET /web")
                slow.append(s)
            time.sleep(0.3)
            t0 = time.monotonic()
            answer = _ask(port, timeout=10)
            waited = time.monotonic() - t0
            assert answer.startswith(b"HTTP/1.1 200"), (answer[:60], waited)
            assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["result"] is True
            print(f"answered behind {len(slow)} half-sent requests in {waited * 1000:.0f} ms")
        finally:
            for s in slow:
                s.close()

    _run(tmp_path, body)


def test_header_deadline_closes_a_silent_client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the server reads the deadline at each request: 1 s here instead of 5, the same code path
    monkeypatch.setattr(admin_mod, "HEADER_DEADLINE_S", 1.0)

    def body(port: int) -> None:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall(b"GET /webapi.htm?type=op_query")
            s.settimeout(admin_mod.HEADER_DEADLINE_S + 5)
            t0 = time.monotonic()
            with contextlib.suppress(ConnectionError):
                assert s.recv(100) == b""
            assert time.monotonic() - t0 < admin_mod.HEADER_DEADLINE_S + 4

    _run(tmp_path, body)
