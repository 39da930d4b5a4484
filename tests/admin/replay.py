"""A real TubeMQ master and two brokers, replayed: web servers on 127.0.0.1 that answer each call with the
body a real TubeMQ 2.5 server sent (tests/data/admin/real, recorded with curl-like raw HTTP).

Answers go out as Jetty sent them: HTTP 200, no ``Content-Type``, no ``Content-Length``, the body ending
when the connection closes. A test scripts which recorded answer each method gets (``answer``), in order
(the last one repeats), and reads back every request the client made (``requests``).
"""

from __future__ import annotations

import json
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from _data import load_json

FAMILIES = ("topics", "brokers", "groups", "offsets", "errors")


def records() -> list[dict[str, Any]]:
    """Every recorded call, in recording order within each family."""
    out: list[dict[str, Any]] = []
    for family in FAMILIES:
        for rec in load_json("admin", "real", f"{family}.json"):
            out.append({**rec, "family": family})
    return out


def record(name: str) -> dict[str, Any]:
    """The one record whose ``name`` starts with (or equals) ``name``."""
    found = [r for r in records() if r["name"] == name] or [r for r in records() if r["name"].startswith(name)]
    if len(found) != 1:
        raise KeyError(f"{len(found)} recorded calls named {name!r}")
    return found[0]


def body(name: str) -> dict[str, Any]:
    answer: dict[str, Any] = json.loads(record(name)["body"])
    return answer


class ReplayServer:
    """One web API (the master or a broker) answering scripted recorded bodies."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.script: dict[str, list[str]] = {}
        self.requests: list[tuple[str, dict[str, str], dict[str, str]]] = []
        self.dead = False
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self) -> None:
                split = urllib.parse.urlsplit(self.path)
                query = dict(urllib.parse.parse_qsl(split.query, keep_blank_values=True))
                n = int(self.headers.get("Content-Length") or 0)
                form = dict(urllib.parse.parse_qsl(self.rfile.read(n).decode(), keep_blank_values=True)) if n else {}
                method = query.get("method") or form.get("method", "")
                outer.requests.append((method, query, form))
                queue = outer.script.get(method)
                if queue is None:
                    text = outer.unsupported(method)
                else:
                    text = queue.pop(0) if len(queue) > 1 else queue[0]
                self.send_response_only(200)
                self.send_header("Connection", "close")
                self.send_header("Server", "Jetty(9.4.57.v20241219)")
                self.end_headers()
                self.wfile.write(text.encode())
                self.close_connection = True

            do_GET = _answer
            do_POST = _answer

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/webapi.htm"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()

    def unsupported(self, method: str) -> str:
        if self.label == "master":
            return body_text("master: unsupported method")
        return json.dumps({"result": False, "errCode": 400, "errMsg": f"Unsupported method {method}"})

    def answer(self, method: str, *names: str) -> None:
        """Answer ``method`` with the recorded bodies of ``names``, in order (the last one repeats)."""
        texts = []
        for name in names:
            rec = record(name)
            assert rec["method"] == method, (name, rec["method"], method)
            texts.append(rec["body"])
        self.script[method] = texts

    def calls(self, method: str) -> list[dict[str, str]]:
        """The parameters (query and form together) of every request for ``method``."""
        return [{**q, **f} for m, q, f in self.requests if m == method]

    def close(self) -> None:
        if not self.dead:
            self.httpd.shutdown()
            self.httpd.server_close()
            self.dead = True


def body_text(name: str) -> str:
    return str(record(name)["body"])


class RealCluster:
    """The recorded master plus brokers 1 and 2; ``broker_urls`` points an AdminClient at the replays."""

    def __init__(self) -> None:
        self.master = ReplayServer("master")
        self.brokers = {1: ReplayServer("broker 1"), 2: ReplayServer("broker 2")}
        self.master.script["admin_query_broker_run_status"] = [self.run_status("query_broker_run_status: all brokers")]

    def run_status(self, name: str) -> str:
        """A recorded run-status answer with brokers 1 and 2 at their replays' web addresses (the
        recorded ones, 127.0.0.1:8081 and 127.0.0.2:8082, are not on this machine)."""
        answer = body(name)
        for item in answer.get("data") or []:
            replay = self.brokers.get(item.get("brokerId"))
            if replay is not None:
                item["brokerIp"], item["brokerWebPort"] = "127.0.0.1", replay.port
        return json.dumps(answer)

    @property
    def broker_urls(self) -> dict[int, str]:
        return {bid: b.url for bid, b in self.brokers.items()}

    def kill(self, broker_id: int) -> None:
        """The broker's web API stops answering (its port closed): what a SIGKILLed broker leaves."""
        self.brokers[broker_id].close()

    def close(self) -> None:
        self.master.close()
        for b in self.brokers.values():
            b.close()


@contextmanager
def real_cluster() -> Iterator[RealCluster]:
    cluster = RealCluster()
    try:
        yield cluster
    finally:
        cluster.close()
