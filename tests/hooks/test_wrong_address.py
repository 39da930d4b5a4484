"""A wrong master address fails fast with a message that says what is there (real sockets on 127.0.0.1).

Each case but one is a NotTubeMQPortError (never retried: another attempt cannot help) whose text
names what was found; the elapsed time is printed (not asserted: CI machines are loaded).
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tubemq
from tubemq.errors import ConfigError, ConnectionLostError, NotTubeMQPortError
from tubemq.server import EmbeddedCluster
from tubemq.server.testing import FAST_CLIENT_TIMERS as FAST_SERVER

CLIENT = {"heartbeat_period_ms": 300, "rpc_timeout_ms": 20000, "register_retry_wait_ms": 100}


def _start(address: str, kind: Any = NotTubeMQPortError, **options: Any) -> tuple[BaseException, float]:
    t0 = time.monotonic()
    with pytest.raises(kind) as err:
        with tubemq.Producer(address, **CLIENT, **options):
            pass
    elapsed = time.monotonic() - t0
    print(f"{address}: {elapsed:.1f} s: {err.value}")
    return err.value, elapsed


@pytest.fixture
def silent() -> Iterator[str]:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)  # accepts (the kernel does) and never answers
    try:
        yield f"127.0.0.1:{srv.getsockname()[1]}"
    finally:
        srv.close()


def test_silent_port_is_bounded_by_the_first_answer_timeout(silent: str) -> None:
    exc, elapsed = _start(silent)
    assert "sent nothing" in str(exc) and "not a TubeMQ master" in str(exc)
    # rpc_timeout_ms is 20 s and registration makes 5 attempts: only the first-answer bound can end it first
    assert elapsed < 5 * 20


def test_http_port(cluster) -> None:
    host_port = cluster.admin_url.split("//", 1)[1].split("/", 1)[0]
    exc, _ = _start(host_port)
    assert "HTTP port" in str(exc)


def test_broker_port_given_as_master(cluster) -> None:
    exc, _ = _start(cluster.broker_address)
    assert "broker port, not a master" in str(exc)
    assert isinstance(exc.__cause__, tubemq.errors.RemoteError)


def test_http_url_as_master() -> None:
    with pytest.raises(ConfigError) as err:
        tubemq.Producer("http://127.0.0.1:8080/webapi.htm")
    assert "web (admin API) address" in str(err.value) and err.value.field == "master"


def test_tls_client_against_a_plaintext_master(cluster) -> None:
    exc, _ = _start(cluster.master_address, tls=True, tls_verify=False)
    assert "TLS handshake" in str(exc) and "tls=False" in str(exc)


def test_plaintext_client_against_a_tls_master(tmp_path: Path, cert: tuple[str, str]) -> None:
    crt, key = cert
    with EmbeddedCluster(data_dir=tmp_path / "d", tls_cert=crt, tls_key=key, **FAST_SERVER) as cl:
        # the TLS server closes on a plaintext frame without a byte: retried like any drop (a master
        # restarting looks the same), each attempt ends at once, and the message names the likely cause
        exc, _ = _start(cl.master_address, (NotTubeMQPortError, ConnectionLostError))
        assert "tls=True" in str(exc)
        # and the right settings work against the same server
        with tubemq.Producer(cl.master_address, tls=True, tls_ca=crt, **CLIENT) as p:
            assert p.client_id


def test_cli_http_master_is_a_usage_error() -> None:
    import sys

    r = subprocess.run([sys.executable, "-m", "tubemq", "produce", "--master", "http://127.0.0.1:8080/webapi.htm",
                        "--topic", "t"], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert r.returncode != 0
    assert "web (admin API) address" in r.stderr and "Traceback" not in r.stderr


def test_a_master_that_answered_once_is_not_judged_by_its_silence() -> None:
    """After one answer from an address, a later silent connection to it is a plain timeout (retried:
    a paused master), not a NotTubeMQPortError."""
    import asyncio

    from tubemq.errors import TubeMQTimeoutError
    from tubemq.net.invoker import MasterInvoker
    from tubemq.net.pool import ConnectionPool, PoolSettings
    from tubemq.protocol import master_pb

    async def main() -> None:
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(16)
        address = f"127.0.0.1:{srv.getsockname()[1]}"
        pool = ConnectionPool(PoolSettings(connect_timeout=0.5))
        inv = MasterInvoker([address], pool, timeout_ms=3000)
        inv.first_answer_s = 0.5
        req = master_pb.CloseRequestP2M(clientId="c")
        with pytest.raises(NotTubeMQPortError):
            await inv.call(3, req, master_pb.CloseResponseM2P)
        inv._answered.add(address)  # as if it had answered before
        with pytest.raises(TubeMQTimeoutError):
            await inv.call(3, req, master_pb.CloseResponseM2P)
        await pool.close()
        srv.close()

    asyncio.run(main())
