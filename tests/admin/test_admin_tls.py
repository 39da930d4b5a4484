"""Admin clients (sync and asyncio) over HTTPS: ``verify`` / ``ssl_context`` against a local HTTPS server
with a self-signed certificate (tests/_support/tls.py), through the one urllib transport."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Iterator
from typing import Any

import pytest

import tubemq.aio
from tubemq.admin import AdminClient
from tubemq.errors import ConfigError, TubeMQConnectionError

from .conftest import SampleServer


@pytest.fixture
def https_server(cert: tuple[str, str]) -> Iterator[SampleServer]:
    crt, key = cert
    server = SampleServer()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(crt, key)
    server.httpd.socket = ctx.wrap_socket(server.httpd.socket, server_side=True)
    server.url = server.url.replace("http://", "https://")
    with server.running():
        yield server


def topics(admin: Any) -> list[str]:
    return sorted(t.name for t in admin.list_topics())


def test_sync_client_verifies_the_certificate(https_server: SampleServer, cert: tuple[str, str]) -> None:
    crt, _ = cert
    with pytest.raises(TubeMQConnectionError, match="TLS|CERTIFICATE|certificate"):
        AdminClient(https_server.url, timeout=5).list_topics()  # the system's CAs do not know it
    expected = topics(AdminClient(https_server.url, timeout=5, verify=crt))
    assert expected  # the recorded sample's topics
    assert topics(AdminClient(https_server.url, timeout=5, verify=False)) == expected
    ctx = ssl.create_default_context(cafile=crt)
    assert topics(AdminClient(https_server.url, timeout=5, ssl_context=ctx)) == expected
    assert all(q.get("method") == "admin_query_topic_info" for q, _ in https_server.requests)


def test_asyncio_client_uses_the_same_transport(https_server: SampleServer, cert: tuple[str, str]) -> None:
    crt, _ = cert

    async def main() -> tuple[list[str], list[str]]:
        async with tubemq.aio.AdminClient(https_server.url, timeout=5) as plain:
            with pytest.raises(TubeMQConnectionError):
                await plain.list_topics()
        async with tubemq.aio.AdminClient(https_server.url, timeout=5, verify=crt) as admin:
            by_ca = sorted(t.name for t in await admin.list_topics())
        ctx = ssl.create_default_context(cafile=crt)
        async with tubemq.aio.AdminClient(https_server.url, timeout=5, ssl_context=ctx) as admin:
            by_ctx = sorted(t.name for t in await admin.list_topics())
        return by_ca, by_ctx

    by_ca, by_ctx = asyncio.run(main())
    assert by_ca == by_ctx == topics(AdminClient(https_server.url, timeout=5, verify=crt))


def test_tls_options_are_checked() -> None:
    with pytest.raises(ConfigError, match="verify"):
        AdminClient("https://127.0.0.1:1/webapi.htm", verify="/no/such/ca.pem")
    with pytest.raises(ConfigError, match="ssl_context"):
        AdminClient("https://127.0.0.1:1/webapi.htm", ssl_context="not a context")  # type: ignore[arg-type]


def test_asyncio_client_bounded_and_typed_when_nothing_answers() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens

    async def main() -> None:
        async with tubemq.aio.AdminClient(f"http://127.0.0.1:{port}", timeout=3) as admin:
            with pytest.raises(TubeMQConnectionError, match="connection refused"):
                await admin.list_topics()

    asyncio.run(main())
