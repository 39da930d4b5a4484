"""Clients against a master that misbehaves in every way of ``hostile.MODES``: each constructor must
fail with a TubeMQError subclass naming the master, within a bound (5 register attempts of at most
one RPC timeout each, plus the waits between them)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import tubemq
from tubemq.errors import TubeMQError

from .hostile import MODES, HostilePeer

RPC_TIMEOUT_MS = 3000  # the smallest the config allows (Java's clamp)
#: 5 attempts x (timeout + retry wait), plus slack for a loaded CI machine
BOUND_S = 5 * (RPC_TIMEOUT_MS / 1000 + 1.2) + 8

OPTIONS: dict[str, Any] = {"rpc_timeout_ms": RPC_TIMEOUT_MS, "register_retry_wait_ms": 1, "pool": "private"}

CLIENTS: dict[str, Callable[[str], Any]] = {
    "Producer": lambda m: tubemq.Producer(m, **OPTIONS),
    "Consumer": lambda m: tubemq.Consumer(m, group="g_hostile", topics=["t"], **OPTIONS),
    "BoundConsumer": lambda m: tubemq.BoundConsumer(m, "g_hostile_b", ["t"], **OPTIONS),
}


def _attempt(make: Callable[[str], Any], address: str, out: dict[str, Any], name: str) -> None:
    t0 = time.monotonic()
    try:
        client = make(address)
    except BaseException as exc:  # noqa: BLE001 - the type is what the test checks
        out[name] = (exc, time.monotonic() - t0)
    else:
        client.close()
        out[name] = (None, time.monotonic() - t0)


TEST_NAME = "test_constructors_fail_typed_and_bounded"


class _Run:
    """One hostile master and the three constructors attempting against it, on their own threads."""

    def __init__(self, mode: str) -> None:
        self.peer = HostilePeer(mode).start()
        self.results: dict[str, Any] = {}
        self.threads = [threading.Thread(target=_attempt, args=(make, self.peer.address, self.results, name),
                                         daemon=True) for name, make in CLIENTS.items()]
        for t in self.threads:
            t.start()


@pytest.fixture(scope="module")
def runs(request: pytest.FixtureRequest) -> Iterator[dict[str, _Run]]:
    """Every selected mode's attempts, all started at once: each waits on its own RPC timeouts (5 x 3 s
    for the silent kinds), so running the modes side by side takes the time of one, not of seven. Each
    test then checks its own mode; the clock of each attempt starts on its own thread, as before."""
    modes = [item.callspec.params["mode"] for item in request.session.items
             if item.module is request.module and getattr(item, "originalname", "") == TEST_NAME]
    started: dict[str, _Run] = {}
    try:
        for mode in dict.fromkeys(modes):
            started[mode] = _Run(mode)
        yield started
    finally:
        for run in started.values():
            for t in run.threads:
                t.join(BOUND_S + 30)
            run.peer.stop()


@pytest.mark.parametrize("mode", MODES)
def test_constructors_fail_typed_and_bounded(mode: str, runs: dict[str, _Run]) -> None:
    run = runs[mode]
    peer, results = run.peer, run.results
    for t in run.threads:
        t.join(BOUND_S + 30)
    assert peer.requests > 0, "the clients never reached the hostile master"
    for name in CLIENTS:
        assert name in results, f"{name}() still running after {BOUND_S + 30:.0f} s against a {mode} master"
        exc, took = results[name]
        assert exc is not None, f"{name}() succeeded against a {mode} master"
        assert isinstance(exc, TubeMQError), f"{name}(): {type(exc).__name__}: {exc} is not a TubeMQError"
        assert peer.address in str(exc), f"{name}(): {exc!r} does not name the master"
        assert took < BOUND_S, f"{name}() took {took:.1f} s against a {mode} master (bound {BOUND_S:.0f} s)"
