"""Issue 11.10: mutual TLS (``tls_client_ca``) and a plaintext client on a TLS port told so.

Certificates are made with the openssl CLI (skipped with the reason when it is absent): a CA, a
client certificate it signs, and a self-signed server certificate.
"""

from __future__ import annotations

import shutil
import ssl
import subprocess
from pathlib import Path
from typing import Any

import pytest
from server._raw import RawClient  # tests/ is on sys.path (rootdir-relative packages)

import tubemq
from tubemq.errors import ConfigError, TubeMQError
from tubemq.server import EmbeddedCluster
from tubemq.server.testing import FAST_CLIENT_TIMERS as FAST_TIMERS

CLIENT: dict[str, Any] = {"heartbeat_period_ms": 200, "register_retry_wait_ms": 100, "rpc_timeout_ms": 3000,
                          "connect_timeout_ms": 1000}


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Made once for the module (three RSA keys cost seconds); the tests only read the files."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl CLI is not installed: cannot make test certificates")
    d = tmp_path_factory.mktemp("pki")
    f = {n: str(d / n) for n in ("ca.crt", "ca.key", "srv.crt", "srv.key", "cli.csr", "cli.crt", "cli.key")}
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f["ca.key"], "-out", f["ca.crt"],
             "-days", "1", "-subj", "/CN=test client CA")
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f["srv.key"], "-out", f["srv.crt"],
             "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1")
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f["cli.key"], "-out", f["cli.csr"],
             "-subj", "/CN=client")
    _openssl("x509", "-req", "-in", f["cli.csr"], "-CA", f["ca.crt"], "-CAkey", f["ca.key"], "-CAcreateserial",
             "-out", f["cli.crt"], "-days", "1")
    return f


def test_client_certificate_required_with_tls_client_ca(tmp_path: Path, pki: dict[str, str]) -> None:
    with EmbeddedCluster(data_dir=tmp_path / "d", tls_cert=pki["srv.crt"], tls_key=pki["srv.key"],
                         tls_client_ca=pki["ca.crt"], **FAST_TIMERS) as cl:
        cl.create_topic("mtls", partitions=1)
        with_cert = ssl.create_default_context(cafile=pki["srv.crt"])
        with_cert.load_cert_chain(pki["cli.crt"], pki["cli.key"])
        with RawClient(cl.broker_address, ssl_context=with_cert) as c:
            assert c.send("mtls", 0, b"signed client").success
        without = ssl.create_default_context(cafile=pki["srv.crt"])
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            with RawClient(cl.broker_address, ssl_context=without) as c:
                c.send("mtls", 0, b"anonymous")  # TLS 1.3: the refusal arrives with the first read
        # the library's producer with and without its certificate
        tls = {"tls": True, "tls_ca": pki["srv.crt"]}
        with tubemq.Producer(cl.master_address, tls_cert=pki["cli.crt"], tls_key=pki["cli.key"], **tls,
                             **CLIENT) as p:
            p.send("mtls", b"from the library")
        with pytest.raises(TubeMQError):
            tubemq.Producer(cl.master_address, **tls, **CLIENT).close()


def test_plaintext_client_on_a_tls_port_gets_an_error_that_says_tls(tmp_path: Path, pki: dict[str, str]) -> None:
    with EmbeddedCluster(data_dir=tmp_path / "d", tls_cert=pki["srv.crt"], tls_key=pki["srv.key"],
                         **FAST_TIMERS) as cl:
        with pytest.raises(TubeMQError) as ei:
            tubemq.Producer(cl.master_address, **CLIENT).close()
        assert "TLS" in str(ei.value) or "tls" in str(ei.value), str(ei.value)


def test_client_ca_needs_a_server_certificate(tmp_path: Path, pki: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match="tls_client_ca"):
        EmbeddedCluster(data_dir=tmp_path / "d", tls_client_ca=pki["ca.crt"])
    with pytest.raises(ConfigError, match="tls_client_ca"):
        EmbeddedCluster(data_dir=tmp_path / "d", tls_cert=pki["srv.crt"], tls_key=pki["srv.key"],
                        tls_client_ca=str(tmp_path / "missing.pem")).start()
