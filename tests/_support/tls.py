"""A self-signed server certificate for 127.0.0.1, made with the openssl CLI (skipped when it is absent)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest


def self_signed_cert(directory: Path) -> tuple[str, str]:
    """``(certificate, key)`` paths of a fresh self-signed certificate valid for IP 127.0.0.1."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl CLI is not installed: cannot make a test certificate")
    crt, key = directory / "server.crt", directory / "server.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(crt),
         "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True, timeout=60,
    )
    return str(crt), str(key)
