"""Fixtures of the admin client tests: a web server answering the recorded real-API samples."""

from __future__ import annotations

import contextlib
import json
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from _data import data_path

#: method -> sample file under tests/data/admin (what the real master / broker answer)
SAMPLES = {
    "admin_query_offset": "broker_admin_query_offset.json",
    "admin_query_group_offset": "broker_admin_query_group_offset.json",
    "admin_manual_set_current_offset": "broker_admin_manual_set_current_offset.json",
    "admin_set_offset": "broker_admin_set_offset.json",
    "admin_set_offset_by_time": "broker_admin_set_offset_by_time.json",
    "admin_clone_offset": "broker_admin_clone_offset_fail.json",
    "admin_get_booked_groupname": "broker_admin_get_booked_groupname.json",
    "admin_query_topic_info": "master_admin_query_topic_info.json",
    "admin_modify_topic_info": "master_admin_modify_topic_info.json",
    "admin_query_consume_group_detail": "master_admin_query_consume_group_detail.json",
}


class SampleServer:
    """A master + broker stand-in on 127.0.0.1 that answers each method with its recorded sample,
    the real servlet's "Unsupported method" otherwise; ``requests`` keeps (query, body) of every call."""

    def __init__(self) -> None:
        self.requests: list[tuple[dict[str, str], dict[str, str]]] = []
        self.overrides: dict[str, Any] = {}
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self) -> None:
                split = urllib.parse.urlsplit(self.path)
                query = dict(urllib.parse.parse_qsl(split.query))
                n = int(self.headers.get("Content-Length") or 0)
                body = dict(urllib.parse.parse_qsl(self.rfile.read(n).decode())) if n else {}
                outer.requests.append((query, body))
                method = query.get("method") or body.get("method", "")
                if method in outer.overrides:
                    payload = json.dumps(outer.overrides[method]).encode()
                elif method in SAMPLES:
                    payload = data_path("admin", SAMPLES[method]).read_bytes()
                else:
                    payload = data_path("admin", "broker_unsupported_method.json").read_bytes()
                    payload = payload.replace(b"admin_query_offset_by_time", method.encode())
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = _answer
            do_POST = _answer

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/webapi.htm"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def run_status(self, broker_ids: list[int]) -> dict[str, Any]:
        """``admin_query_broker_run_status`` naming this server as every broker's web API."""
        port = self.httpd.server_address[1]
        return {"result": True, "errCode": 0, "errMsg": "OK", "count": len(broker_ids), "data": [
            {"brokerId": b, "brokerIp": "127.0.0.1", "brokerPort": 8123, "brokerWebPort": port,
             "manageStatus": "online", "brokerTLSPort": 8124, "enableTLS": False, "isRepAbnormal": False,
             "isAutoForbidden": False, "runStatus": "running", "subStatus": "idle", "isConfChanged": "false",
             "isConfLoaded": "true", "isBrokerOnline": "true", "brokerVersion": "-", "acceptPublish": "true",
             "acceptSubscribe": "true"} for b in broker_ids]}


    @contextlib.contextmanager
    def running(self) -> Iterator[SampleServer]:
        """Serving until the block ends."""
        self.thread.start()
        try:
            yield self
        finally:
            self.httpd.shutdown()
            self.httpd.server_close()


@pytest.fixture
def sample_server() -> Iterator[SampleServer]:
    server = SampleServer()
    server.overrides["admin_query_broker_run_status"] = server.run_status([1])
    with server.running():
        yield server
