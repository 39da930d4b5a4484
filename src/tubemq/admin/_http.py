"""The HTTP side of the admin client: requests built and answers checked without I/O, and two small
transports over them (blocking urllib for the sync client, asyncio streams for the asyncio one).

Why two transports and no third-party HTTP library: the web APIs are a handful of form-encoded calls
with JSON answers, one per connection; each transport is bounded (timeout, answer size) and maps every
failure to a typed error from :mod:`tubemq.errors`. The admin token travels in the POST body of
modify calls only, so it never shows in a URL, a log line or an exception.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import logging
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from tubemq.errors import AdminError, ConfigError, TubeMQConnectionError, TubeMQTimeoutError

from .._tasks import wait_for

log = logging.getLogger("tubemq.admin")

#: Answers larger than this are refused (a full topic listing of a big cluster is a few MiB).
MAX_ANSWER_BYTES = 64 * 1024 * 1024
MAX_HEADER_BYTES = 64 * 1024
_HINT = " (a master's RPC port does not answer HTTP: the admin API is on its web port, 8080 by default)"


def normalise_url(url: str) -> str:
    """``host:port``, ``http://host:port`` or a full ``.../webapi.htm`` URL -> the ``webapi.htm`` URL.

    A bare master address (``host:port[,host:port]``) of an embedded server running on this machine
    becomes the admin URL that server published (``tubemq._endpoints``)."""
    url = url.strip()
    if not url:
        raise ConfigError("url", "an admin URL or master address is required")
    if "://" not in url and "/" not in url:
        from tubemq._endpoints import lookup

        for address in url.split(","):
            found = lookup(address.strip())
            if found is not None and found.admin_url:
                return found.admin_url
        url = url.split(",")[0].strip()
    if "://" not in url:
        url = "http://" + url
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError("url", f"not an http(s) admin URL: {url!r}")
    path = parts.path
    if not path.endswith(".htm"):
        path = path.rstrip("/") + "/webapi.htm"
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, "", ""))


@dataclass
class Request:
    """One web API call: ``type`` (op_query/op_modify), ``method`` and its parameters.

    ``url`` None = the master; a broker call carries its broker's web URL.
    """

    op_type: str
    method: str
    params: dict[str, Any] = field(default_factory=dict)
    url: str | None = None

    def encode(self, base_url: str, token: str | None) -> tuple[str, bytes | None]:
        """(URL, form body or None). Modify calls POST their parameters (token included)."""
        query: dict[str, str] = {"type": self.op_type, "method": self.method}
        body: dict[str, str] = {}
        modify = self.op_type == "op_modify"
        target = body if modify else query
        for key, value in self.params.items():
            if value is None:
                continue
            target[key] = str(value).lower() if isinstance(value, bool) else str(value)
        if modify and token:
            body["confModAuthToken"] = token
        url = (self.url or base_url) + "?" + urllib.parse.urlencode(query)
        return url, (urllib.parse.urlencode(body).encode() if modify else None)


def _where(url: str) -> str:
    return url.split("?", 1)[0]


def check_answer(raw: bytes, url: str, method: str) -> dict[str, Any]:
    """Decode one answer; ``result: false`` (or not JSON) raises :class:`AdminError`."""
    try:
        answer = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise AdminError(-1, f"{_where(url)} did not answer JSON", method) from None
    if not isinstance(answer, dict):
        raise AdminError(-1, f"unexpected answer from {_where(url)}: {str(answer)[:200]}", method)
    if not answer.get("result", False):
        code = answer.get("errCode")
        raise AdminError(int(code) if isinstance(code, int) else -1, str(answer.get("errMsg") or "call failed"), method)
    return answer


def _http_error(status: int, reason: str, detail: bytes, url: str, method: str) -> AdminError:
    try:
        answer = json.loads(detail.decode("utf-8", "replace"))
        if isinstance(answer, dict) and "errMsg" in answer:
            return AdminError(int(answer.get("errCode") or status), str(answer["errMsg"]), method)
    except ValueError:
        pass
    return AdminError(status, f"HTTP {status} {reason} from {_where(url)}", method)


def call_blocking(req: Request, base_url: str, token: str | None, timeout: float) -> dict[str, Any]:
    """One call on the caller's thread (urllib), bounded by ``timeout`` per socket operation."""
    url, body = req.encode(base_url, token)
    hreq = urllib.request.Request(url, data=body, method="POST" if body is not None else "GET")
    if body is not None:
        hreq.add_header("Content-Type", "application/x-www-form-urlencoded")
    log.debug("admin call %s %s", req.method, _where(url))
    deadline = time.monotonic() + timeout
    try:
        with urllib.request.urlopen(hreq, timeout=timeout) as resp:
            raw = _read_until(resp, deadline, url, req.method)
    except urllib.error.HTTPError as exc:
        try:
            detail = exc.read(4096)
        except OSError:
            detail = b""
        raise _http_error(exc.code, str(exc.reason), detail, url, req.method) from None
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, socket.timeout | TimeoutError):
            raise TubeMQTimeoutError(f"{_where(url)} did not answer {req.method} in {timeout:g}s{_HINT}") from None
        why = "connection refused" if isinstance(reason, ConnectionRefusedError) else str(reason)
        raise TubeMQConnectionError(f"cannot reach the admin API at {_where(url)} ({why})") from None
    except TimeoutError:
        raise TubeMQTimeoutError(f"{_where(url)} did not answer {req.method} in {timeout:g}s{_HINT}") from None
    except (OSError, http.client.HTTPException) as exc:
        raise TubeMQConnectionError(f"admin API at {_where(url)}: {exc or type(exc).__name__}{_HINT}") from None
    if len(raw) > MAX_ANSWER_BYTES:
        raise AdminError(-1, f"answer from {_where(url)} is over {MAX_ANSWER_BYTES} bytes", req.method)
    return check_answer(raw, url, req.method)


def _read_until(resp: Any, deadline: float, url: str, method: str) -> bytes:
    """The body in chunks, the whole of it within the call's deadline (a server dripping bytes slower
    than the socket timeout would otherwise hold the caller for as long as it likes)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = resp.read(256 * 1024)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > MAX_ANSWER_BYTES:
            return b"".join(chunks) + chunk  # the caller refuses it by its size
        chunks.append(chunk)
        if time.monotonic() > deadline:
            raise TimeoutError


async def call_async(req: Request, base_url: str, token: str | None, timeout: float) -> dict[str, Any]:
    """One call over asyncio streams (HTTP/1.1, ``Connection: close``), the whole exchange in ``timeout``."""
    url, body = req.encode(base_url, token)
    try:
        return await wait_for(_exchange(url, body, req.method), timeout)
    except asyncio.TimeoutError:
        raise TubeMQTimeoutError(f"{_where(url)} did not answer {req.method} in {timeout:g}s{_HINT}") from None


async def _exchange(url: str, body: bytes | None, method: str) -> dict[str, Any]:
    parts = urllib.parse.urlsplit(url)
    https = parts.scheme == "https"
    host = parts.hostname or "127.0.0.1"
    port = parts.port or (443 if https else 80)
    log.debug("admin call %s %s", method, _where(url))
    try:
        reader, writer = await asyncio.open_connection(host, port, ssl=https or None, limit=MAX_HEADER_BYTES)
    except OSError as exc:
        why = "connection refused" if isinstance(exc, ConnectionRefusedError) else str(exc)
        raise TubeMQConnectionError(f"cannot reach the admin API at {_where(url)} ({why})") from None
    try:
        target = parts.path + ("?" + parts.query if parts.query else "")
        verb = "POST" if body is not None else "GET"
        head = f"{verb} {target} HTTP/1.1\r\nHost: {parts.netloc}\r\nConnection: close\r\nAccept: application/json\r\n"
        if body is not None:
            head += f"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {len(body)}\r\n"
        writer.write(head.encode("latin-1") + b"\r\n" + (body or b""))
        await writer.drain()
        status_line = await reader.readline()
        fields = status_line.decode("latin-1").split(" ", 2)
        if len(fields) < 2 or not fields[0].startswith("HTTP/") or not fields[1].isdigit():
            raise AdminError(-1, f"{_where(url)} did not answer HTTP{_HINT}", method)
        status = int(fields[1])
        headers: dict[str, str] = {}
        while True:
            line = await reader.readline()
            if line in (b"\r\n", b"\n", b""):
                break
            k, _, v = line.decode("latin-1").partition(":")
            headers[k.strip().lower()] = v.strip()
        raw = await _read_body(reader, headers, url, method)
    except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as exc:
        raise TubeMQConnectionError(f"admin API at {_where(url)}: {exc or type(exc).__name__}") from None
    finally:
        writer.close()
        try:
            await wait_for(writer.wait_closed(), 2)
        except (OSError, asyncio.TimeoutError):
            pass
    if status != 200:
        raise _http_error(status, fields[2].strip() if len(fields) > 2 else "", raw[:4096], url, method)
    return check_answer(raw, url, method)


async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str], url: str, method: str) -> bytes:
    if "chunked" in headers.get("transfer-encoding", "").lower():
        out = bytearray()
        while True:
            size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
            if size == 0:
                return bytes(out)
            if len(out) + size > MAX_ANSWER_BYTES:
                raise AdminError(-1, f"answer from {_where(url)} is over {MAX_ANSWER_BYTES} bytes", method)
            out += await reader.readexactly(size)
            await reader.readline()
    length = headers.get("content-length")
    if length is not None:
        n = int(length)
        if n > MAX_ANSWER_BYTES:
            raise AdminError(-1, f"answer from {_where(url)} is over {MAX_ANSWER_BYTES} bytes", method)
        return await reader.readexactly(n)
    raw = await reader.read(MAX_ANSWER_BYTES + 1)
    if len(raw) > MAX_ANSWER_BYTES:
        raise AdminError(-1, f"answer from {_where(url)} is over {MAX_ANSWER_BYTES} bytes", method)
    return raw
