"""The admin API's HTTP/1.1 listener: one bounded request per connection, answered by ``AdminApi``."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import urllib.parse
from typing import Any, Generic, TypeVar

from ..._tasks import wait_for
from ..auth import FailureThrottle
from .params import (
    ERR_BAD_REQUEST,
    ERR_NOT_FOUND,
    TOKEN_MISSING,
    TOKEN_WRONG,
    RequestHandler,
    _AdminError,
    _fail,
    _json_params,
    strict_int,
)

log = logging.getLogger("tubemq.server.admin")

MAX_HEADER_BYTES = 64 * 1024
MAX_BODY_BYTES = 1024 * 1024
#: The request line and headers must arrive within this many seconds of the connection...
HEADER_DEADLINE_S = 5.0
#: ...and the body within this many seconds of the headers (half-sent requests would otherwise
#: hold a slot each, and a few dozen of them would refuse everyone).
BODY_DEADLINE_S = 5.0
#: Connections served at once; at the cap the one that has been sending its request longest is
#: dropped for the newcomer, and when every slot is answering, the newcomer gets a 503.
MAX_ADMIN_CONNECTIONS = 64

#: The API behind the listener (``AdminApi``; typed by what the listener asks of it).
_Api = TypeVar("_Api", bound=RequestHandler)


class AdminServer(Generic[_Api]):
    """HTTP listener for ``AdminApi`` on ``config.host:config.admin_port`` (0 = ephemeral)."""

    def __init__(self, api: _Api, host: str, port: int) -> None:
        self.api = api
        self.host = host
        self.port = port
        self._server: asyncio.base_events.Server | None = None
        #: task -> monotonic time its request started (0.0 once it is being answered)
        self._conns: dict[asyncio.Task[None], float] = {}
        #: a source that keeps sending wrong admin tokens waits before each request
        self.throttle = FailureThrottle()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/webapi.htm"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, self.port, limit=MAX_HEADER_BYTES)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("admin API listening on %s", self.url)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for t in list(self._conns):
            t.cancel()
        for t in list(self._conns):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        if self._server is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await wait_for(self._server.wait_closed(), 5)
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is None:  # pragma: no cover - always inside a task
            writer.close()
            return
        if len(self._conns) >= MAX_ADMIN_CONNECTIONS and not self._evict_slowest_reader():
            log.warning("admin API: %d requests in progress, answering 503", len(self._conns))
            with contextlib.suppress(Exception):
                await wait_for(self._respond(writer, 503, _fail(503, "too many admin requests")), 2)
            await self._close(writer)
            return
        self._conns[task] = time.monotonic()
        try:
            peer = writer.get_extra_info("peername")
            source = str(peer[0]) if isinstance(peer, tuple) and peer else "?"
            status, body = await self._read_and_handle(reader, task, source)
            await wait_for(self._respond(writer, status, body), HEADER_DEADLINE_S)
        except (asyncio.TimeoutError, ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # slow, vanished or evicted client: nothing to answer
        except (asyncio.LimitOverrunError, ValueError):  # header line over the stream limit
            with contextlib.suppress(Exception):
                await wait_for(
                    self._respond(writer, 431, _fail(ERR_BAD_REQUEST, "request header too large")), 2
                )
        except Exception:  # never let one request kill the listener
            log.exception("admin request failed")
        finally:
            self._conns.pop(task, None)
            await self._close(writer)

    def _evict_slowest_reader(self) -> bool:
        """Cancel the connection that has been sending its request longest (not one being answered)."""
        readers = [(t, since) for t, since in self._conns.items() if since > 0]
        if not readers:
            return False
        task, since = min(readers, key=lambda item: item[1])
        log.warning("admin API: connection limit reached, dropping a request unfinished after %.1f s",
                    time.monotonic() - since)
        self._conns.pop(task, None)
        task.cancel()
        return True

    @staticmethod
    async def _close(writer: asyncio.StreamWriter) -> None:
        writer.close()
        with contextlib.suppress(Exception):
            await wait_for(writer.wait_closed(), 2)

    async def _read_and_handle(
        self, reader: asyncio.StreamReader, task: asyncio.Task[None], source: str = "?"
    ) -> tuple[int, dict[str, Any]]:
        first = await wait_for(reader.readexactly(1), HEADER_DEADLINE_S)
        if not (b"A" <= first <= b"Z" or b"a" <= first <= b"z"):
            # not an HTTP method (e.g. a TubeMQ RPC frame: a client pointed at this port): say so at
            # once, as Jetty does, instead of waiting for a header end that never comes
            return 400, _fail(ERR_BAD_REQUEST, "not an HTTP request")
        head = first + await wait_for(reader.readuntil(b"\r\n\r\n"), HEADER_DEADLINE_S)
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            return 400, _fail(ERR_BAD_REQUEST, "bad request line")
        verb, target = parts[0].upper(), parts[1]
        headers = {}
        for line in lines[1:]:
            if ":" in line:
                k, _, v = line.partition(":")
                headers[k.strip().lower()] = v.strip()
        if verb not in ("GET", "POST"):
            return 405, _fail(ERR_BAD_REQUEST, f"method {verb} not allowed")
        split = urllib.parse.urlsplit(target)
        if not split.path.rstrip("/").endswith("webapi.htm"):
            return 404, _fail(ERR_NOT_FOUND, f"no such path {split.path}")
        params = dict(urllib.parse.parse_qsl(split.query, keep_blank_values=True))
        if "transfer-encoding" in headers:
            # a chunked (or otherwise encoded) body is not read here: refusing it beats taking the
            # request as if its body were empty
            return 411, _fail(ERR_BAD_REQUEST, "Transfer-Encoding is not supported: send the body with Content-Length")
        if verb == "POST":
            try:
                length = strict_int(headers.get("content-length", "0"))
            except ValueError:
                return 400, _fail(ERR_BAD_REQUEST, "bad Content-Length")
            if length < 0 or length > MAX_BODY_BYTES:
                return 413, _fail(ERR_BAD_REQUEST, "request body too large")
            body = await wait_for(reader.readexactly(length), BODY_DEADLINE_S) if length else b""
            ctype = headers.get("content-type", "")
            text = body.decode("utf-8", "replace")
            if "json" in ctype and text.strip():
                try:
                    params.update(_json_params(text))
                except _AdminError as exc:
                    return 400, _fail(exc.code, exc.message)
            else:
                params.update(urllib.parse.parse_qsl(text, keep_blank_values=True))
        wait = self.throttle.wait(source)
        if wait > 0:  # still a reader here: evictable while it waits
            await asyncio.sleep(wait)
        self._conns[task] = 0.0  # answering now: never evicted
        answer = self.api.handle(params)
        if answer.get("errMsg") in (TOKEN_MISSING, TOKEN_WRONG):
            self.throttle.failure(source)
        return 200, answer

    @staticmethod
    async def _respond(writer: asyncio.StreamWriter, status: int, body: dict[str, Any]) -> None:
        payload = json.dumps(body, ensure_ascii=False).encode()
        reason = {
            200: "OK",
            400: "Bad Request",
            404: "Not Found",
            405: "Method Not Allowed",
            411: "Length Required",
            413: "Payload Too Large",
            431: "Request Header Fields Too Large",
            503: "Service Unavailable",
        }.get(status, "Error")
        head = (
            f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json;charset=UTF-8\r\n"
            f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n"
        )
        writer.write(head.encode("latin-1") + payload)
        await writer.drain()
