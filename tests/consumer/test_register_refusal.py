"""A master that refuses a registration (``success=false``): which refusals end the start at once and
which are retried, per client kind, as the Java client does (README "Refused registration").

Java: ProducerManager.register2Master retries every code 5 times 1 s apart; the server-balanced
BaseMessageConsumer retries at once (no sleep after a refusal) and singles out 450/455; the
client-balance SimpleClientBalanceConsumer retries every code 1 s apart. Real TCP against the
embedded cluster; the master's handler is wrapped to count the register requests it answers."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import tubemq
from tubemq.errors import (
    AuthenticationError,
    ConsumeForbiddenError,
    ErrorCode,
    ServerError,
    TopicNotDeployedError,
)
from tubemq.protocol import master_pb
from tubemq.server import EmbeddedCluster
from tubemq.server.master import Master
from tubemq.server.testing import FAST_CLIENT_TIMERS as FAST_SERVER

#: how long a constructor may take before the test calls it hung (a guard, not a speed check)
HANG_GUARD_S = 120.0
FAST: dict[str, Any] = {"rpc_timeout_ms": 3000, "connect_timeout_ms": 1000, "pool": "private"}


class Counted:
    """Wraps a Master handler (class attribute) and counts the requests it answered."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, name: str,
                 answer: Callable[[Any, Any, Any], Any] | None = None) -> None:
        self.calls = 0
        original = getattr(Master, name)

        def handler(master: Master, req: Any, ctx: Any) -> Any:
            self.calls += 1
            return answer(master, req, ctx) if answer is not None else original(master, req, ctx)

        monkeypatch.setattr(Master, name, handler)


def start(fn: Callable[[], Any]) -> BaseException:
    """Run a client constructor that must fail; return its exception (fail when it hangs or works)."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            client = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            outcome.append(exc)
        else:
            client.close()
            outcome.append(None)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(HANG_GUARD_S)
    assert outcome, f"the client neither started nor failed within {HANG_GUARD_S} s"
    exc = outcome[0]
    assert exc is not None, "the refused client started"
    return exc


@contextlib.contextmanager
def served(tmp_path: Path, **options: Any) -> Iterator[EmbeddedCluster]:
    """A cluster with topic "tt"; started after the handlers are wrapped (they are bound at start)."""
    with EmbeddedCluster(data_dir=tmp_path / "d", **FAST_SERVER, **options) as c:
        c.create_topic("tt", partitions=1)
        yield c


SECURE: dict[str, Any] = {"auth_enabled": True, "auth_users": {"alice": "s3cret"}}


def test_producer_retries_an_authentication_refusal_five_times(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    reg = Counted(monkeypatch, "producer_register")
    with served(tmp_path, **SECURE) as c:
        exc = start(lambda: tubemq.Producer(c.master_address, register_retry_wait_ms=10, **FAST))
    assert isinstance(exc, AuthenticationError), repr(exc)
    assert exc.code == ErrorCode.CERTIFICATE_FAILURE
    assert exc.message  # the master's own text
    assert exc.message in str(exc)
    assert reg.calls == 5  # Java: maxRegisterRetryTimes (5), every code retried


def test_consumer_retries_a_refusal_at_once_and_raises_the_typed_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    reg = Counted(monkeypatch, "consumer_register")
    with served(tmp_path, **SECURE) as c:
        # a 10-minute wait between attempts would trip the hang guard: the consumer must not wait
        exc = start(lambda: tubemq.Consumer(c.master_address, group="g", topics=["tt"],
                                            register_retry_wait_ms=600_000, **FAST))
    assert isinstance(exc, AuthenticationError), repr(exc)
    assert exc.message and exc.message in str(exc)
    assert reg.calls == 5


def test_consumer_retries_a_missing_topic(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """431 (and 424-430) are retried like Java does; the last refusal is raised, typed."""
    reg = Counted(monkeypatch, "consumer_register")
    with served(tmp_path) as c:
        exc = start(lambda: tubemq.Consumer(c.master_address, group="g", topics=["nope"],
                                            register_retry_wait_ms=10, **FAST))
    assert isinstance(exc, TopicNotDeployedError), repr(exc)
    assert "nope" in str(exc)
    assert reg.calls == 5


@pytest.mark.parametrize("code", [ErrorCode.CONSUME_GROUP_FORBIDDEN, ErrorCode.CONSUME_CONTENT_FORBIDDEN])
def test_consumer_gives_up_at_once_on_a_forbidden_group(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, code: ErrorCode
) -> None:
    def forbid(master: Master, req: Any, ctx: Any) -> Any:
        return master_pb.RegisterResponseM2C(success=False, errCode=int(code), errMsg=f"group g is forbidden {code}")

    reg = Counted(monkeypatch, "consumer_register", forbid)
    with served(tmp_path) as c:
        exc = start(lambda: tubemq.Consumer(c.master_address, group="g", topics=["tt"],
                                            register_retry_wait_ms=10, **FAST))
    assert isinstance(exc, ConsumeForbiddenError), repr(exc)
    assert exc.code == code and f"group g is forbidden {code}" in str(exc)
    assert reg.calls == 1


def test_bound_consumer_retries_every_refusal(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Java's client-balance consumer retries even 450, 1 s apart (here register_retry_wait_ms)."""
    def forbid(master: Master, req: Any, ctx: Any) -> Any:
        return master_pb.RegisterResponseM2CV2(errCode=int(ErrorCode.CONSUME_GROUP_FORBIDDEN),
                                               errMsg="group g is forbidden")

    reg = Counted(monkeypatch, "consumer_register_v2", forbid)
    with served(tmp_path) as c:
        exc = start(lambda: tubemq.BoundConsumer(c.master_address, group="g", topics=["tt"],
                                                 register_retry_wait_ms=10, **FAST))
    assert isinstance(exc, ServerError), repr(exc)
    assert exc.code == ErrorCode.CONSUME_GROUP_FORBIDDEN and "group g is forbidden" in str(exc)
    assert reg.calls == 5
