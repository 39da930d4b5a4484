"""Unit tests of server/auth.py: §8.1 signature, §8.2 master checks, visit-token rotation."""

from __future__ import annotations

import json

import pytest
from _data import vector

from tubemq.protocol import master_pb
from tubemq.protocol.constants import ErrorCode
from tubemq.server.auth import (
    MSG_BAD_PASSWORD,
    MSG_NO_CERTIFICATE,
    MSG_SIGNATURE_BLANK,
    MSG_TIMESTAMP,
    MSG_USER_BLANK,
    VISIT_TOKEN_HISTORY,
    MasterAuthenticator,
    VisitTokenManager,
    auth_signature,
)


def test_signature_matches_golden_vector() -> None:
    assert auth_signature("admin", "secret", 1700000000000, 123456789) == "TUKLpKqdL99rgSYZ2nqBwALIpU0%3D"


def test_signature_vector_file() -> None:
    text = json.dumps(vector("auth_signature"))
    assert "TUKLpKqdL99rgSYZ2nqBwALIpU0%3D" in text


def cert(
    user: str = "admin", ts: int = 1_000_000, nonce: int = 7, sig: str | None = None, password: str = "secret"
) -> master_pb.MasterCertificateInfo:
    if sig is None:
        sig = auth_signature(user, password, ts, nonce)
    c = master_pb.MasterCertificateInfo()
    c.authInfo.CopyFrom(
        master_pb.AuthenticateInfo(userName=user, timestamp=ts, nonce=nonce, othParams="", signature=sig)
    )
    return c


def test_disabled_accepts_anything() -> None:
    a = MasterAuthenticator(False)
    assert a.check(None).ok
    assert a.check(master_pb.MasterCertificateInfo()).ok
    assert a.issue_token("x") == ""


def test_enabled_checks_in_java_order() -> None:
    a = MasterAuthenticator(True, clock_ms=lambda: 1_000_000)
    r = a.check(None)
    assert (r.ok, r.err_code, r.message) == (False, ErrorCode.CERTIFICATE_FAILURE, MSG_NO_CERTIFICATE)
    # absent authInfo behaves like an empty one (Java getters)
    assert a.check(master_pb.MasterCertificateInfo()).message == MSG_USER_BLANK
    assert a.check(cert(user="  ")).message == MSG_USER_BLANK
    assert a.check(cert(sig=" ")).message == MSG_SIGNATURE_BLANK
    assert a.check(cert(ts=1_000_000 - 20_001)).message == MSG_TIMESTAMP
    assert a.check(cert(ts=1_000_000 + 20_001)).message == MSG_TIMESTAMP
    assert a.check(cert(ts=1_000_000 - 20_000)).ok
    # no user table: like the upstream placeholder, any signature passes
    ok = a.check(cert(sig="whatever"))
    assert ok.ok and ok.user_name == "admin"


def test_user_table_verifies_signature() -> None:
    a = MasterAuthenticator(True, {"admin": "secret"}, clock_ms=lambda: 1_000_000)
    assert a.check(cert()).ok
    r = a.check(cert(sig="TUKLpKqdL99rgSYZ2nqBwALIpU0%3D"))
    assert (r.ok, r.err_code, r.message) == (False, 415, MSG_BAD_PASSWORD)
    assert a.check(cert(user="bob", password="secret")).message == MSG_BAD_PASSWORD


def test_issued_token_accepted_for_heartbeats_only_when_allowed() -> None:
    a = MasterAuthenticator(True, clock_ms=lambda: 1_000_000)
    token = a.issue_token("admin")
    c = master_pb.MasterCertificateInfo(authorizedToken=token)
    assert not a.check(c).ok
    r = a.check(c, allow_token=True)
    assert r.ok and r.user_name == "admin"
    assert (
        a.check(master_pb.MasterCertificateInfo(authorizedToken="forged"), allow_token=True).message
        == MSG_USER_BLANK
    )


def test_visit_tokens_rotate_and_keep_six() -> None:
    now = [1_000]
    m = VisitTokenManager(240_000, clock_ms=lambda: now[0])
    first = m.current
    assert m.is_valid(first)
    assert not m.rotate_if_due()
    now[0] += 240_000
    assert m.rotate_if_due()
    assert m.current != first and m.is_valid(first)
    for _ in range(VISIT_TOKEN_HISTORY):
        now[0] += 240_000
        m.rotate_if_due()
    assert not m.is_valid(first)
    assert len(m.tokens()) == VISIT_TOKEN_HISTORY
    assert m.broker_tokens() == f"{m.tokens()[0]},{m.current}"
    assert not m.is_valid(-2)


def test_visit_tokens_are_random_int64_not_timestamps() -> None:
    """Issue 11.6: the real master's ms timestamps were guessed in 500 tries; these are 63 random bits."""
    now = [1_700_000_000_000]
    m = VisitTokenManager(1, clock_ms=lambda: now[0])
    seen = set()
    for _ in range(200):
        now[0] += 1
        t = m.rotate()
        assert 0 < t < 1 << 63  # fits the wire's int64, never -2 ("no token yet")
        assert abs(t - now[0]) > 10**9  # nowhere near the clock
        seen.add(t)
    assert len(seen) == 200
    assert max(seen).bit_length() >= 55  # 200 draws of 63 bits: all below 2^55 has probability 2^-1600


def test_visit_token_redrawn_when_it_repeats_or_is_not_positive() -> None:
    draws = iter([7, 7, 0, -2, 9])
    m = VisitTokenManager(1, clock_ms=lambda: 5, random_token=lambda: next(draws))
    assert m.current == 7
    assert m.rotate() == 9
    assert m.tokens() == [7, 9]


def test_bad_period_rejected() -> None:
    with pytest.raises(ValueError):
        VisitTokenManager(0)
