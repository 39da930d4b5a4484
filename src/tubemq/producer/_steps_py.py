"""Pure-Python twin of :mod:`tubemq.producer._steps` (same class, contract and steps)."""

from __future__ import annotations

import time
from typing import Any

from .. import codec

implementation = "python"

_monotonic = time.monotonic
_encode_send = codec.encode_send_request


class PlainSteps:
    """``engine``'s plain-send steps; ``latency``: the send-latency histogram (one in 8 sampled)."""

    __slots__ = ("admit", "buffer", "client_id", "latency", "quality", "sent_addr", "session", "timeout",
                 "timeout_ms", "written")

    def __init__(self, engine: Any, latency: Any) -> None:
        self.session = engine.session
        self.buffer = engine.buffer
        self.quality = engine.quality
        self.latency = latency
        self.client_id = engine.client_id
        self.sent_addr = engine.sent_addr
        self.timeout_ms = engine.timeout_ms
        self.timeout = engine.timeout
        #: a buffer slot if one is free now: True, else False (full or closed); never waits or raises
        self.admit = engine.buffer.take_now
        #: count attempts written: ``sent`` messages (first attempts, ``size`` bytes), ``resent`` resends
        self.written = engine.buffer.written

    def admit_job(self, job: Any) -> bool:
        """:meth:`admit`, and when admitted ``job``'s clock starts now (``t0``, ``deadline``)."""
        if not self.admit():
            return False
        now = job.t0 = _monotonic()
        job.deadline = now + self.timeout
        return True

    def frame(self, serial: int, topic: str, partition_id: int, data: bytes) -> bytes:
        """The send frame of a plain body (no attributes, stream id or time), tokens as of now."""
        session = self.session
        return _encode_send(serial, self.client_id, topic, partition_id, data, 0, self.sent_addr,
                            session.visit_token, auth_token=session.auth_token or None, timeout_ms=self.timeout_ms)

    def settle(self, broker_id: int, size: int, t0: float) -> None:
        """A message admitted with :meth:`admit` was written once (``size`` bytes, at ``t0``) and
        stored by a caller's thread: counted, its slot given back."""
        quality = self.quality
        if quality.failures:
            quality.success(broker_id)
        if self.buffer.release(True, True, size) & 7 == 1:  # one in 8, the first included
            self.latency.observe(_monotonic() - t0)
