"""Bounded waiting: every poll loop in the suite ends, with a message that says what it waited for.

Tests assert outcomes, never wall-clock bounds: the timeouts here are generous limits that only turn a
hang into a failure (CI is a loaded 2-core machine).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest


def wait_for(
    cond: Callable[[], Any], timeout: float = 15.0, what: str = "", *, interval: float = 0.02,
    step: Callable[[], Any] | None = None,
) -> Any:
    """Poll ``cond`` (after ``step``, when given) until it returns a truthy value, which is returned;
    fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        if step is not None:
            step()
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what or getattr(cond, '__name__', cond)}")
        time.sleep(interval)


def waited(cond: Callable[[], Any], timeout: float = 15.0, what: str = "", *, interval: float = 0.05) -> float:
    """Like :func:`wait_for`, but returns the seconds it took (for a test's printed figures)."""
    t0 = time.monotonic()
    wait_for(cond, timeout, what, interval=interval)
    return time.monotonic() - t0


def drain(consumer: Any, count: int, timeout: float = 15.0, confirm: bool = True) -> list[Any]:
    """Poll (and confirm) a blocking consumer until ``count`` messages arrived; fail after ``timeout`` s."""
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
