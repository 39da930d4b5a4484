"""The HTTP side of the admin client: requests built and answers checked without I/O, over one
transport (:mod:`tubemq._webcall`, urllib) that the asyncio client runs in a worker thread.

Why no third-party HTTP library: the web APIs are a handful of form-encoded calls with JSON answers, one
per connection; the transport is bounded (timeout, answer size) and maps every failure to a typed error
from :mod:`tubemq.errors`. The admin token travels in the POST body of modify calls only, so it never
shows in a URL, a log line or an exception.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from tubemq.errors import AdminError, ConfigError, TubeMQTimeoutError

from .. import _webcall as webcall

log = logging.getLogger("tubemq.admin")

#: Answers larger than this are refused (a full topic listing of a big cluster is a few MiB).
MAX_ANSWER_BYTES = webcall.MAX_ANSWER_BYTES
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


_where = webcall.where


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


def call_blocking(req: Request, base_url: str, token: str | None, timeout: float,
                  context: ssl.SSLContext | None = None) -> dict[str, Any]:
    """One call on the caller's thread, bounded by ``timeout``; ``context``: TLS for https URLs."""
    url, body = req.encode(base_url, token)
    log.debug("admin call %s %s", req.method, _where(url))
    try:
        answer = webcall.request(url, body, timeout=timeout, context=context, max_bytes=MAX_ANSWER_BYTES,
                                 hint=_HINT)
    except TubeMQTimeoutError:
        raise TubeMQTimeoutError(f"{_where(url)} did not answer {req.method} in {timeout:g}s{_HINT}") from None
    if answer.status != 200:
        raise _http_error(answer.status, answer.reason, answer.body[:4096], url, req.method)
    if len(answer.body) > MAX_ANSWER_BYTES:
        raise AdminError(-1, f"answer from {_where(url)} is over {MAX_ANSWER_BYTES} bytes", req.method)
    return check_answer(answer.body, url, req.method)


async def call_async(req: Request, base_url: str, token: str | None, timeout: float,
                     context: ssl.SSLContext | None = None) -> dict[str, Any]:
    """:func:`call_blocking` in a worker thread (``asyncio.to_thread``): the same transport, proxies and TLS
    for both clients. Cancelling the caller abandons the thread, which ends within ``timeout``."""
    return await asyncio.to_thread(call_blocking, req, base_url, token, timeout, context)
