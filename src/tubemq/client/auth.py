"""Client side of TubeMQ authentication (docs/PROTOCOL.md §8): signatures and the tokens built from them.

Only used when the client is configured with a user name; passwords never reach a log line.
"""

from __future__ import annotations

import random
import time

from ..protocol import master_pb
from ..protocol.auth import auth_signature

#: The §8.1 signature (one implementation, in the protocol layer, shared with the embedded master).
signature = auth_signature


def _now_nonce(timestamp_ms: int | None, nonce: int | None) -> tuple[int, int]:
    ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    n = random.randint(0, 2**31 - 1) if nonce is None else nonce
    return ts, n


def authenticate_info(
    user: str, password: str, *, timestamp_ms: int | None = None, nonce: int | None = None
) -> master_pb.AuthenticateInfo:
    """A fresh ``AuthenticateInfo`` (all five fields are required on the wire)."""
    ts, n = _now_nonce(timestamp_ms, nonce)
    return master_pb.AuthenticateInfo(
        userName=user, timestamp=ts, nonce=n, othParams="", signature=signature(user, password, ts, n)
    )


def master_cert_info(
    user: str, password: str, *, timestamp_ms: int | None = None, nonce: int | None = None
) -> master_pb.MasterCertificateInfo:
    """``MasterCertificateInfo{authInfo}`` for register/close (and heartbeats after requireAuth)."""
    return master_pb.MasterCertificateInfo(
        authInfo=authenticate_info(user, password, timestamp_ms=timestamp_ms, nonce=nonce)
    )


def master_token_info(authorized_token: str) -> master_pb.MasterCertificateInfo:
    """``MasterCertificateInfo{authorizedToken}`` for ordinary heartbeats (§8.2)."""
    return master_pb.MasterCertificateInfo(authorizedToken=authorized_token)


def broker_auth_token(
    user: str, password: str, *, timestamp_ms: int | None = None, nonce: int | None = None
) -> str:
    """``"<user> <timestamp> <nonce> <signature>"`` for ``AuthorizedInfo.authAuthorizedToken`` (§8.3)."""
    ts, n = _now_nonce(timestamp_ms, nonce)
    return f"{user} {ts} {n} {signature(user, password, ts, n)}"


__all__ = ["authenticate_info", "broker_auth_token", "master_cert_info", "master_token_info", "signature"]
