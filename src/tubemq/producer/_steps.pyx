# cython: language_level=3
"""The engine's per-message steps of a plain send (admit, frame, settle), compiled.

Why: a blocking send's common case is one compiled call (:mod:`tubemq._bridge._plain`), and the three
engine steps it takes per message were each a Python frame (with a lock round inside two of them):
the bulk of the client's work per send. Here each is one C method over the same state: the buffer's
slot count and message counters under the buffer's lock (as :meth:`SendBuffer.take_now` and
:meth:`SendBuffer.release` keep them; a release with a waiter to wake goes through ``release`` itself),
and the frame straight from the codec's compiled encoder. :class:`ProducerEngine` builds one and
exposes its methods as ``admit_now``, ``plain_frame`` and ``settle_plain``.
``tubemq.producer._steps_py`` is the pure-Python twin: same class, contract and steps.
"""

from libc.stdint cimport int64_t, uint32_t

from tubemq.codec.compiled cimport c_encode_send

import time

cdef object _monotonic = time.monotonic

implementation = "cython"


cdef class PlainSteps:
    """``engine``'s plain-send steps; ``latency``: the send-latency histogram (one in 8 sampled)."""
    cdef object session
    cdef object buffer
    cdef object quality
    cdef object latency
    cdef object lock_acquire
    cdef object lock_release
    cdef str client_id
    cdef int64_t sent_addr
    cdef int64_t timeout_ms
    cdef double timeout

    def __init__(self, engine, latency):
        self.session = engine.session
        self.buffer = engine.buffer
        self.quality = engine.quality
        self.latency = latency
        self.lock_acquire = engine.buffer.lock.acquire
        self.lock_release = engine.buffer.lock.release
        self.client_id = engine.client_id
        self.sent_addr = engine.sent_addr
        self.timeout_ms = engine.timeout_ms
        self.timeout = engine.timeout

    def admit(self):
        """A buffer slot if one is free now: True, else False (full or closed); never waits or raises."""
        return self.take()

    cdef bint take(self) except -1:
        cdef object buffer = self.buffer
        self.lock_acquire()
        try:
            if buffer.closed or buffer.used >= buffer.max_pending:
                return False
            buffer.used += 1
            return True
        finally:
            self.lock_release()

    def admit_job(self, job):
        """:meth:`admit`, and when admitted ``job``'s clock starts now (``t0``, ``deadline``)."""
        cdef double now
        if not self.take():
            return False
        now = _monotonic()
        job.t0 = now
        job.deadline = now + self.timeout
        return True

    def written(self, sent, size, resent):
        """Count attempts written: ``sent`` messages (first attempts, ``size`` bytes), ``resent`` resends."""
        cdef object buffer = self.buffer
        self.lock_acquire()
        try:
            buffer.sent += sent
            buffer.bytes_sent += size
            buffer.retried += resent
        finally:
            self.lock_release()

    def frame(self, uint32_t serial, str topic, int64_t partition_id, data):
        """The send frame of a plain body (no attributes, stream id or time), tokens as of now."""
        cdef object session = self.session
        auth = session.auth_token
        return c_encode_send(serial, self.client_id, topic, partition_id, data, 0, self.sent_addr,
                             session.visit_token, None, None, auth if auth else None, -1, self.timeout_ms, 3, 3)

    def settle(self, broker_id, Py_ssize_t size, double t0):
        """A message admitted with :meth:`admit` was written once (``size`` bytes, at ``t0``) and
        stored by a caller's thread: counted, its slot given back."""
        cdef object buffer = self.buffer
        cdef object n = None
        if self.quality.failures:
            self.quality.success(broker_id)
        self.lock_acquire()
        try:
            if not (buffer.thread_waiters or buffer.task_waiters):
                buffer.used -= 1
                buffer.sent += 1
                buffer.bytes_sent += size
                n = buffer.acknowledged = buffer.acknowledged + 1
                buffer.direct += 1
        finally:
            self.lock_release()
        if n is None:  # someone waits for room: the buffer's own release wakes them
            n = buffer.release(True, True, size)
        if (<int64_t>n) & 7 == 1:  # one in 8, the first included
            self.latency.observe(<double>_monotonic() - t0)
