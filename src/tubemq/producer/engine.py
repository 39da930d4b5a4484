"""The producer engine: every decision a send needs, with no I/O, no threads and no event loop (§5.1, §6.2).

Why one engine: the same send goes out three ways (the event loop, a caller's own blocking socket, and
the compiled blocking send), and each must admit, route, frame, judge, retry and count exactly alike.
So those three are drivers that move bytes and wait; this object decides:

* ``try_admit`` / ``admit_now`` / :meth:`start_clock`: a slot in the bounded send buffer (a
  driver that must wait for one waits on the buffer its own way), and the message's deadline;
* :meth:`route` / :meth:`route_direct`: the partition (round-robin, key, user partitioner, shielding);
* :meth:`frame`: the whole send frame with the session's tokens as of now;
* :meth:`written`: one attempt went out (counted);
* :meth:`stored` / :meth:`judge`: what an answer (or a transport error) means: a SendResult, the error
  to report, or ``RETRY`` (a retryable refusal with attempts and time left);
* :meth:`settle` / ``settle_plain``: the outcome (counted, the slot given back, the owner told).

A driver reads top to bottom: admit, then per attempt route, frame, write, read, judge, until an outcome,
then settle. Thread-safe: any driver may call any method from any thread (the counters, the buffer, the
router and the quality tracker lock themselves or are single dict operations).

Failure rules: a broker's explicit refusal with a retryable code (419, 500, 503) is resent up to
``retries`` times after ``retry_backoff_ms`` (it was not stored: no duplicate); so is a message whose
connection was lost before its answer (a broker restarting: the frame may have gone to a socket whose
peer was already dead; it may also have been stored, so this resend is at-least-once), up to the same
``retries``, so that sends in flight across a broker restart wait for the broker like queued ones do; a
timeout or any other error is reported (the message may or may not be stored); and every message
is settled by its deadline, ``rpc_timeout_ms`` after it was admitted (or the blocking send's
``timeout``), whatever it waits for: a partition list, a connect, window room, the answer, a resend.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import Any, Protocol

from .. import codec
from ..config import ProducerConfig
from ..errors import (
    ClientClosedError,
    ConnectionLostError,
    DecodeError,
    MessageTooLargeError,
    RemoteError,
    TubeMQConnectionError,
    TubeMQTimeoutError,
    error_for_code,
    remote_error,
)
from ..metrics import Metrics
from ..protocol.constants import ErrorCode
from ..types import SendResult
from .buffer import SendBuffer
from .message import Job, with_context
from .quality import BrokerQuality
from .router import Router
from .stats import register_metrics

if os.environ.get("TUBEMQ_NO_EXTENSIONS", "") not in ("", "0"):
    from . import _steps_py as _steps
else:
    try:
        from . import _steps  # type: ignore[no-redef]
    except ImportError:  # pragma: no cover - exercised when the extension was not built
        from . import _steps_py as _steps  # type: ignore[no-redef]

log = logging.getLogger("tubemq.producer.engine")

#: Broker answers after which the message was certainly not stored and may be resent (§6.2).
RETRYABLE_CODES = frozenset({ErrorCode.SERVER_RECEIVE_OVERFLOW, ErrorCode.INTERNAL_SERVER_ERROR,
                             ErrorCode.SERVICE_UNAVAILABLE})

#: What :meth:`ProducerEngine.judge` returns for a refusal that is to be resent.
RETRY: Any = object()

_monotonic = time.monotonic
_encode_send = codec.encode_send_request
#: a send answer straight to the SendResult (one compiled call; None: not stored, judge() says why)
_send_result = codec.decode_send_result
_decode_response = codec.decode_response
_decode_send = codec.decode_send_response


class Metadata(Protocol):
    """What the engine reads of the master session (the session's own driver keeps it current)."""

    client_id: str
    host_name: str
    visit_token: int
    auth_token: str
    max_msg_size: int
    topics: dict[str, int]
    partitions: dict[str, list[codec.Partition]]
    topic_max_sizes: dict[str, int]
    route_gen: int

    def max_size(self, topic: str) -> int: ...


class SideDriver(Protocol):
    """A driver with figures of its own for the metrics (the blocking API's channels and inbox)."""

    def io(self, address: str) -> dict[str, int]:
        """Wire bytes of its own connections to ``address`` (``bytes_sent`` / ``bytes_received``)."""

    def queued(self) -> int:
        """Messages it holds that no driver has started yet."""


class ProducerEngine:
    """The decisions of one producer; see the module docstring."""

    def __init__(self, config: ProducerConfig, session: Metadata, metrics: Metrics) -> None:
        self.config = config
        self.session = session
        self.metrics = metrics
        self.client_id = session.client_id
        self.sent_addr = codec.ip_to_int(session.host_name)
        self.timeout_ms = config.rpc_timeout_ms
        self.timeout = config.rpc_timeout_ms / 1000.0
        self.backoff = config.retry_backoff_ms / 1000.0
        self.router = Router(config.partitioner)
        self.quality = BrokerQuality(config.broker_failure_threshold, config.broker_shield_ms, config.unavailable_ms)
        self.buffer = SendBuffer(config.max_pending, config.max_block_ms / 1000.0)
        #: a caller's thread may do a send's round trip itself (no TLS, no user partitioner: loop business)
        self.direct_ok = not config.tls and not callable(self.router.partitioner)
        self.closed = False
        self._latency = metrics.histogram("producer.send_latency")
        # the per-message steps of a plain send, compiled where built (``_steps``, twin ``_steps_py``)
        steps = _steps.PlainSteps(self, self._latency)
        #: ``admit_now()``: a buffer slot if one is free now (never waits, never raises): False when full
        #: or closed (then the caller takes a route that waits or refuses)
        self.admit_now: Callable[[], bool] = steps.admit
        #: ``plain_frame(serial, topic, partition_id, data)``: :meth:`frame` of a plain body (no
        #: attributes, no stream id, no time) without a :class:`Job`
        self.plain_frame: Callable[[int, str, int, bytes], bytes] = steps.frame
        #: ``settle_plain(broker_id, size, t0)``: a plain message admitted with ``admit_now`` was written
        #: once and stored (the compiled blocking send, which builds no :class:`Job`)
        self.settle_plain: Callable[[int, int, float], None] = steps.settle
        #: ``try_admit(job)``: a buffer slot for ``job`` if one is free now, and its deadline
        #: (:meth:`start_clock`); never waits, never raises: False when full or closed (a driver then
        #: waits for room its own way, ``buffer.take`` on a thread or ``buffer.take_async`` on a loop,
        #: and starts the clock)
        self.try_admit: Callable[[Job], bool] = steps.admit_job
        #: ``written_batch(sent, size, resent)``: :meth:`written` for many attempts at once (``sent``
        #: first attempts of ``size`` bytes in all, ``resent`` resends), one lock round
        self.written_batch: Callable[[int, int, int], None] = steps.written
        self._sides: list[SideDriver] = []
        self._loop_in_flight: Callable[[], int] = lambda: 0
        self._loop_backlog: Callable[[], int] = lambda: 0
        self.health = register_metrics(metrics, self.buffer, session, self.quality, self._gauges, self._io)

    # ------------------------------------------------------------------ drivers and figures

    def attach(self, side: SideDriver) -> None:
        """Count ``side``'s own connections and queue in the metrics."""
        self._sides.append(side)

    def set_loop_figures(self, in_flight: Callable[[], int], backlog: Callable[[], int]) -> None:
        """The event-loop driver's gauges (requests on the wire, messages waiting to start)."""
        self._loop_in_flight = in_flight
        self._loop_backlog = backlog

    def _gauges(self) -> tuple[int, int, int]:
        return (self.outstanding, self._loop_in_flight(),
                self._loop_backlog() + sum(s.queued() for s in self._sides))

    def _io(self, address: str) -> dict[str, int]:
        total: dict[str, int] = {}
        for side in self._sides:
            for key, n in side.io(address).items():
                total[key] = total.get(key, 0) + n
        return total

    def side_answered(self, address: str) -> bool:
        """True when a side driver's own connections got bytes from ``address`` (the pool's answer
        probe: a close before any answer on the loop's connection then is no TLS port)."""
        return self._io(address).get("bytes_received", 0) > 0

    @property
    def outstanding(self) -> int:
        """Messages admitted and not settled yet, on every route."""
        return self.buffer.used

    def close(self) -> None:
        """No message is admitted or resent from now on; waiters for buffer room fail."""
        self.closed = True
        self.buffer.close()

    # ------------------------------------------------------------------ admission

    def start_clock(self, job: Job, timeout: float | None = None) -> None:
        """``job``'s deadline starts now: ``timeout`` seconds (default ``rpc_timeout_ms``)."""
        now = _monotonic()
        job.t0 = now
        job.deadline = now + (self.timeout if timeout is None else timeout)

    # ------------------------------------------------------------------ routing and framing

    def route(self, job: Job) -> codec.Partition | None:
        """``job``'s partition, or None while its topic has no partition known here (publish or refresh
        first). Raises what belongs to this message only: too large, a bad key, a partitioner's error."""
        session = self.session
        topic = job.topic
        parts = session.partitions.get(topic)
        if not parts or topic not in session.topics:
            return None
        if job.size > session.topic_max_sizes.get(topic, session.max_msg_size):
            raise self.too_large(job)
        quality = self.quality
        return self.router.choose(topic, parts, job.key, quality.shielded() if quality.until else ())

    def route_direct(self, topic: str, size: int, key: Any) -> codec.Partition | None:
        """The partition for a round trip on a caller's thread, or None when the message must take the
        event loop's route (which waits, or reports the problem): closed, TLS or a user partitioner,
        topic without partitions, too large, a bad key, or some broker shielded right now."""
        if self.closed or not self.direct_ok or self.quality.until:
            return None
        session = self.session
        parts = session.partitions.get(topic)
        if not parts or topic not in session.topics:
            return None
        if size > session.topic_max_sizes.get(topic, session.max_msg_size):
            return None
        try:
            return self.router.choose(topic, parts, key)
        except Exception:  # noqa: BLE001 - the loop's route reports it to the caller
            return None

    def too_large(self, job: Job) -> MessageTooLargeError:
        limit = self.session.max_size(job.topic)
        return MessageTooLargeError(
            ErrorCode.PARAMETER_MSG_OVER_MAX_LENGTH,
            f"message of {job.size} bytes (body + attributes) is over the max size {limit} of topic {job.topic!r}",
        )

    def frame(self, serial: int, job: Job) -> bytes:
        """The whole send frame for ``job`` to ``job.part`` (codec hot path; tokens as of now)."""
        session = self.session
        return _encode_send(serial, self.client_id, job.topic, job.part.partition_id, job.payload,  # type: ignore[union-attr]
                            job.flag, self.sent_addr, session.visit_token, msg_type=job.msg_type,
                            msg_time=job.msg_time, auth_token=session.auth_token or None,
                            timeout_ms=self.timeout_ms)

    def left(self, job: Job) -> float:
        """Seconds until ``job``'s deadline (may be <= 0)."""
        return job.deadline - _monotonic()

    def expired(self, job: Job, what: str) -> TubeMQTimeoutError:
        """The error of a message whose deadline passed while it was ``what`` (e.g. "waiting for a
        connection")."""
        return TubeMQTimeoutError(f"message to topic {job.topic!r} not sent within {job.deadline - job.t0:g} s "
                                  f"({what})")

    def written(self, job: Job) -> None:
        """One attempt of ``job`` went out (the first counts as sent, later ones as resends)."""
        if job.attempt:
            self.written_batch(0, 0, 1)
        else:
            self.written_batch(1, job.size, 0)

    # ------------------------------------------------------------------ judging an answer

    def stored(self, job: Job, part: codec.Partition, payload: bytes) -> SendResult | None:
        """The SendResult when ``payload`` says the message was stored, else None (then :meth:`judge`
        tells what it says)."""
        try:
            result: SendResult | None = _send_result(payload, SendResult, job.topic, part, job.key)
        except DecodeError:
            return None
        if result is not None and self.quality.failures:
            self.quality.success(part.broker_id)
        return result

    def judge(self, job: Job, part: codec.Partition, payload: bytes | None,
              exc: BaseException | None) -> SendResult | BaseException:
        """The outcome of one attempt: a SendResult, the error to report, or ``RETRY`` for a retryable
        refusal or a lost connection with attempts and time left (the driver resends it after
        :attr:`backoff`). Updates the broker quality figures on the way."""
        quality = self.quality
        if exc is not None:
            quality.failure(part.broker_id)
            if type(exc) is ConnectionLostError and self._may_resend(job):
                log.debug("connection to %s lost before the answer (%s); resending (attempt %d)", part.address,
                          exc, job.attempt + 1)
                return RETRY  # type: ignore[no-any-return]
            if isinstance(exc, (TubeMQTimeoutError, TubeMQConnectionError)):
                self.metrics.inc("producer.unknown_outcome")
            return with_context(exc, job, part)
        try:
            envelope = _decode_response(payload)
            if envelope.status:
                raise remote_error(envelope.exception_name, envelope.message, envelope.status)
            rsp = _decode_send(envelope.body)
        except (RemoteError, DecodeError) as e:
            quality.failure(part.broker_id)
            return with_context(e, job, part)
        if rsp.success:
            if quality.failures:
                quality.success(part.broker_id)
            return SendResult(job.topic, part, rsp.message_id, rsp.append_time, rsp.append_offset, job.key)
        code = rsp.err_code
        quality.refused(part.broker_id)
        if code == ErrorCode.SERVICE_UNAVAILABLE:
            quality.unavailable(part.broker_id)
        if code in RETRYABLE_CODES and self._may_resend(job):
            log.debug("broker %s refused a message with %d; resending (attempt %d)", part.address, code,
                      job.attempt + 1)
            return RETRY  # type: ignore[no-any-return]
        return with_context(error_for_code(code, rsp.err_msg), job, part)

    def _may_resend(self, job: Job) -> bool:
        """True (and the attempt counted) when ``job`` has a resend left and time for its backoff."""
        if job.attempt < self.config.retries and not self.closed and self.left(job) > self.backoff:
            job.attempt += 1
            return True
        return False

    def retry_error(self, job: Job) -> BaseException | None:
        """Why a resend due now must not go out (closed, or out of time), else None."""
        if self.closed:
            return ClientClosedError("producer closed before the retry was sent")
        if self.left(job) <= 0:
            return self.expired(job, "waiting to be resent")
        return None

    # ------------------------------------------------------------------ settlement

    def settle(self, job: Job, result: SendResult | None, exc: BaseException | None, direct: bool = False) -> None:
        """``job``'s outcome, exactly once: counted, its slot given back, its owner's ``done`` called.
        ``direct``: a caller's thread sent it itself."""
        if job.finished:
            return
        job.finished = True
        n = self.buffer.release(result is not None, direct)
        if n & 7 == 1 and job.t0:  # send latency of one acknowledged message in 8, the first included
            self._latency.observe(_monotonic() - job.t0)
        done = job.done
        if done is not None:
            try:
                done(job, result, exc)
            except Exception:
                log.exception("send completion callback failed")

    def plain_job(self, topic: str, data: bytes, key: Any, part: codec.Partition, t0: float,
                  written: bool) -> Job:
        """The :class:`Job` of a plain message admitted with :meth:`admit_now` whose first attempt did
        not end stored (``written``: it went out, and is counted as sent now)."""
        job = Job(topic, data, 0, len(data), None, None, key, None)
        job.part = part
        job.t0 = t0
        job.deadline = t0 + self.timeout
        if written:
            self.written(job)
        return job


__all__ = ["RETRY", "RETRYABLE_CODES", "Metadata", "ProducerEngine", "SideDriver"]
