"""The broker processes' admin calls (server/registration.admin_get) through the shared transport:
bounded, typed as AdminCallError, and never sent through the environment's proxy."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tubemq.server.registration import AdminCallError, admin_get


@pytest.fixture
def web() -> Iterator[tuple[str, list[str]]]:
    paths: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            paths.append(self.path)
            status, payload = (500, b"boom") if "fail" in self.path else (200, json.dumps({"result": True}).encode())
            self.send_response(status)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/webapi.htm", paths
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_admin_get_answers_and_ignores_proxies(web: tuple[str, list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    url, paths = web
    with socket.socket() as s:  # a proxy address where nothing listens
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{dead}")
    monkeypatch.setenv("no_proxy", "")
    answer = asyncio.run(admin_get(url, {"type": "op_query", "method": "x", "brokerId": "2"}, 5))
    assert answer == {"result": True}
    assert paths == ["/webapi.htm?type=op_query&method=x&brokerId=2"]


def test_admin_get_failures_are_typed(web: tuple[str, list[str]]) -> None:
    url, _ = web
    with pytest.raises(AdminCallError, match="500"):
        asyncio.run(admin_get(url, {"method": "fail"}, 5))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(AdminCallError, match="refused"):
        asyncio.run(admin_get(f"http://127.0.0.1:{port}/webapi.htm", {}, 5))
    with pytest.raises(AdminCallError, match="http://HOST:PORT"):
        asyncio.run(admin_get("https://127.0.0.1:1/webapi.htm", {}, 5))
