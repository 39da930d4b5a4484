"""The compiled plain-send steps and their pure-Python twin agree: same frames, same slot and counter
effects, same refusals (a full or closed buffer), the same wake-up of a thread waiting for room."""

from __future__ import annotations

import os
import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest

from tubemq import codec
from tubemq.metrics import Histogram
from tubemq.producer import _steps_py as py
from tubemq.producer.buffer import SendBuffer
from tubemq.producer.quality import BrokerQuality

NO_EXT = os.environ.get("TUBEMQ_NO_EXTENSIONS", "") not in ("", "0")
pytestmark = pytest.mark.skipif(NO_EXT, reason="TUBEMQ_NO_EXTENSIONS=1: no compiled steps to compare with")
cy: Any = py
if not NO_EXT:
    from tubemq.producer import _steps as cy

IMPLS = [pytest.param(py, id="python"), pytest.param(cy, id="cython")]
COUNTERS = ("used", "sent", "bytes_sent", "acknowledged", "direct", "failed", "retried")


def _engine(max_pending: int = 3, auth: str = "") -> Any:
    session = SimpleNamespace(visit_token=77, auth_token=auth)
    return SimpleNamespace(session=session, buffer=SendBuffer(max_pending, 1.0), quality=BrokerQuality(),
                           client_id="cid-1", sent_addr=codec.ip_to_int("10.1.2.3"), timeout_ms=4000,
                           timeout=4.0)


def _figures(buffer: SendBuffer) -> tuple[int, ...]:
    return tuple(getattr(buffer, a) for a in COUNTERS)


def test_the_compiled_steps_are_compiled() -> None:
    assert cy.implementation == "cython" and py.implementation == "python"


@pytest.mark.parametrize("auth", ["", "token-x"])
@pytest.mark.parametrize(("topic", "pid", "data"), [("t1", 0, b"x"), ("topic_b", 10003, b"\x00" * 5000),
                                                    ("t", 2**31 - 1, bytes(range(256)))])
def test_frames_are_byte_identical(auth: str, topic: str, pid: int, data: bytes) -> None:
    frames = {impl.implementation: impl.PlainSteps(_engine(auth=auth), Histogram()).frame(9, topic, pid, data)
              for impl in (py, cy)}
    assert frames["python"] == frames["cython"]
    # and the same frame the general route's codec call builds
    assert frames["python"] == codec.encode_send_request(9, "cid-1", topic, pid, data, 0, codec.ip_to_int("10.1.2.3"),
                                                         77, auth_token=auth or None, timeout_ms=4000)


def test_frames_follow_the_session_tokens() -> None:
    for impl in (py, cy):
        engine = _engine()
        steps = impl.PlainSteps(engine, Histogram())
        before = steps.frame(1, "t1", 0, b"x")
        engine.session.visit_token = 78
        assert steps.frame(1, "t1", 0, b"x") != before, impl.implementation


def test_admit_and_settle_count_alike() -> None:
    seen = {}
    for impl in (py, cy):
        engine = _engine(max_pending=2)
        latency = Histogram()
        steps = impl.PlainSteps(engine, latency)
        trail = [steps.admit(), steps.admit(), steps.admit(), _figures(engine.buffer)]
        steps.settle(1, 100, time.monotonic())
        trail.append(_figures(engine.buffer))
        trail.append(steps.admit())
        steps.settle(1, 7, time.monotonic())
        steps.settle(1, 7, time.monotonic())
        trail += [_figures(engine.buffer), latency.count]
        engine.buffer.close()
        trail.append(steps.admit())  # closed: refused, never raises
        seen[impl.implementation] = trail
    assert seen["python"] == seen["cython"]
    assert seen["python"][:3] == [True, True, False]
    assert seen["python"][-3:] == [(0, 3, 114, 3, 3, 0, 0), 1, False]


def test_admit_job_starts_the_clock_and_written_counts_alike() -> None:
    seen = {}
    for impl in (py, cy):
        engine = _engine(max_pending=1)
        steps = impl.PlainSteps(engine, Histogram())
        job = SimpleNamespace(t0=0.0, deadline=0.0)
        before = time.monotonic()
        assert steps.admit_job(job)
        assert before <= job.t0 <= time.monotonic() and job.deadline == job.t0 + 4.0
        other = SimpleNamespace(t0=0.0, deadline=0.0)
        assert not steps.admit_job(other) and other.t0 == 0.0  # full: untouched
        steps.written(2, 300, 1)
        steps.written(1, 5, 0)
        seen[impl.implementation] = _figures(engine.buffer)
    assert seen["python"] == seen["cython"] == (1, 3, 305, 0, 0, 0, 1)


def test_settle_clears_a_failing_broker() -> None:
    for impl in (py, cy):
        engine = _engine()
        engine.quality.failure(5)
        steps = impl.PlainSteps(engine, Histogram())
        assert steps.admit()
        steps.settle(5, 1, time.monotonic())
        assert 5 not in engine.quality.failures, impl.implementation


@pytest.mark.parametrize("impl", IMPLS)
def test_settle_wakes_a_thread_waiting_for_room(impl: Any) -> None:
    engine = _engine(max_pending=1)
    steps = impl.PlainSteps(engine, Histogram())
    assert steps.admit()
    got: list[float] = []

    def wait_for_room() -> None:
        engine.buffer.take(False)
        got.append(time.monotonic())

    waiter = threading.Thread(target=wait_for_room)
    waiter.start()
    deadline = time.monotonic() + 10
    while not engine.buffer.thread_waiters and time.monotonic() < deadline:
        time.sleep(0.005)
    assert engine.buffer.thread_waiters == 1
    steps.settle(1, 10, time.monotonic())
    waiter.join(10)
    assert got, "the waiting thread was not given the freed slot"
    assert _figures(engine.buffer) == (1, 1, 10, 1, 1, 0, 0)
