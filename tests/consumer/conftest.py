"""Consumer test helpers: fast client timers and bounded polling helpers."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

#: client timers that keep integration tests fast (the server side is FAST_SERVER in tests/conftest.py)
FAST_CLIENT: dict[str, Any] = {
    "heartbeat_period_ms": 200,
    "msg_not_found_wait_ms": 20,
    "register_retry_wait_ms": 100,
    "rebalance_confirm_wait_ms": 1000,
    "heartbeat_fail_wait_ms": 300,
    "shutdown_wait_ms": 2000,
    "rpc_timeout_ms": 3000,
    "connect_timeout_ms": 1000,
}


def wait_for(cond: Callable[[], Any], timeout: float = 15.0, interval: float = 0.02, what: str = "") -> Any:
    """Poll ``cond`` until it returns a truthy value; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what or cond}")
        time.sleep(interval)


def drain(consumer: Any, count: int, timeout: float = 15.0, confirm: bool = True) -> list[Any]:
    """Poll (and confirm) until ``count`` messages arrived; fail after ``timeout`` seconds."""
    out: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(out) < count:
        if time.monotonic() > deadline:
            pytest.fail(f"got {len(out)} of {count} messages within {timeout} s")
        batch = consumer.poll(0.2)
        if batch is None:
            continue
        out.extend(batch.messages)
        if confirm:
            consumer.confirm(batch)
    return out


def quiet(consumer: Any, seconds: float = 0.5) -> list[Any]:
    """Messages that arrive within ``seconds`` (expected: none)."""
    out: list[Any] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        batch = consumer.poll(0.05)
        if batch is not None:
            out.extend(batch.messages)
            consumer.confirm(batch)
    return out
