"""One bounded HTTP(S) call with urllib: the transport of every web API client in the package.

The admin clients (sync, and asyncio through ``asyncio.to_thread``) and the embedded broker's
registration with its master all go through :func:`request`, so proxies, TLS and the limits behave the
same everywhere. Bounded: ``timeout`` per socket operation and for the whole answer, at most
``max_bytes`` of it. Failures to reach or read are typed errors (:mod:`tubemq.errors`); an HTTP error
status is an answer (:class:`Answer` with its status), judged by the caller.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from .errors import ConfigError, TubeMQConnectionError, TubeMQTimeoutError

#: answers larger than this are cut here and refused by the caller
MAX_ANSWER_BYTES = 64 * 1024 * 1024
_CHUNK = 256 * 1024


@dataclass(frozen=True)
class Answer:
    status: int
    reason: str
    body: bytes


def tls_context(ssl_context: ssl.SSLContext | None = None, verify: bool | str = True) -> ssl.SSLContext | None:
    """The context for https URLs: ``ssl_context`` as given, else ``verify`` = True (the system's CAs:
    None, urllib's default), False (no certificate or host check) or a CA bundle file's path."""
    if ssl_context is not None:
        if not isinstance(ssl_context, ssl.SSLContext):
            raise ConfigError("ssl_context", f"must be an ssl.SSLContext, got {type(ssl_context).__name__}")
        return ssl_context
    if verify is True:
        return None
    if verify is False:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        return ctx
    if isinstance(verify, str) and verify:
        try:
            return ssl.create_default_context(cafile=verify)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError("verify", f"cannot load the CA bundle {verify!r}: {exc}") from None
    raise ConfigError("verify", f"must be True, False or a CA bundle path, got {verify!r}")


def where(url: str) -> str:
    """The URL without its query (what messages and logs show: a query may hold parameters)."""
    return url.split("?", 1)[0]


def request(url: str, body: bytes | None = None, *, timeout: float, context: ssl.SSLContext | None = None,
            max_bytes: int = MAX_ANSWER_BYTES, hint: str = "", proxies: bool = True) -> Answer:
    """GET ``url`` (POST ``body`` as a form when given); the answer within ``timeout`` seconds.
    ``proxies=False`` ignores the environment's proxy settings (server-to-server calls)."""
    hreq = urllib.request.Request(url, data=body, method="POST" if body is not None else "GET")
    hreq.add_header("Accept", "application/json")
    if body is not None:
        hreq.add_header("Content-Type", "application/x-www-form-urlencoded")
    deadline = time.monotonic() + timeout
    late = f"{where(url)} did not answer in {timeout:g}s{hint}"
    try:
        if proxies:
            opened = urllib.request.urlopen(hreq, timeout=timeout, context=context)
        else:
            handlers: list[Any] = [urllib.request.ProxyHandler({})]
            if context is not None:
                handlers.append(urllib.request.HTTPSHandler(context=context))
            opened = urllib.request.build_opener(*handlers).open(hreq, timeout=timeout)
        with opened as resp:
            raw = _read_until(resp, deadline, max_bytes)
            return Answer(resp.status, str(resp.reason), raw)
    except urllib.error.HTTPError as exc:
        try:
            detail = exc.read(4096)
        except OSError:
            detail = b""
        return Answer(exc.code, str(exc.reason), detail)
    except urllib.error.URLError as exc:
        reason: Any = exc.reason
        if isinstance(reason, socket.timeout | TimeoutError):
            raise TubeMQTimeoutError(late) from None
        if isinstance(reason, ssl.SSLError):
            raise TubeMQConnectionError(f"TLS with {where(url)} failed: {reason}") from None
        why = "connection refused" if isinstance(reason, ConnectionRefusedError) else str(reason)
        raise TubeMQConnectionError(f"cannot reach the admin API at {where(url)} ({why})") from None
    except TimeoutError:
        raise TubeMQTimeoutError(late) from None
    except ssl.SSLError as exc:
        raise TubeMQConnectionError(f"TLS with {where(url)} failed: {exc}") from None
    except (OSError, http.client.HTTPException) as exc:
        raise TubeMQConnectionError(f"{where(url)}: {exc or type(exc).__name__}{hint}") from None


def _read_until(resp: Any, deadline: float, max_bytes: int) -> bytes:
    """The body in chunks, the whole of it within the call's deadline (a server dripping bytes slower
    than the socket timeout would otherwise hold the caller for as long as it likes); past ``max_bytes``
    it stops (the caller refuses an answer of more than ``max_bytes``)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = resp.read(_CHUNK)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        chunks.append(chunk)
        if size > max_bytes:
            return b"".join(chunks)
        if time.monotonic() > deadline:
            raise TimeoutError


__all__ = ["MAX_ANSWER_BYTES", "Answer", "request", "tls_context", "where"]
