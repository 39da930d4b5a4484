# cython: language_level=3
"""The blocking ``Producer.send``'s common case in one compiled call (issue 20).

Why: after every wake-up from ``recv`` the Python work of a send costs several times what it does hot,
and a raw loop (pre-encoded frames, ``sendall`` + ``recv``) does almost none. Here the whole common
send is one C function: a cached route of this thread for the topic (its partitions and this thread's
:class:`~tubemq._bridge.channel.BlockingChannel` to each, valid while the session's ``route_gen`` has
not moved), the frame encoded by the codec's C encoder with the session's tokens as of now, the
socket's own ``sendall`` / ``recv_into`` (which release the GIL while blocked), the answer decoded
straight to the :class:`~tubemq.types.SendResult`, and the buffer slot and in-flight count taken and
given back in one lock round each (the buffer and the producer core share that lock).

Anything else returns None before anything is taken or written (the general route sends it), or, once
the frame may have gone out, hands what it has to the bridge's ``resume`` (refusals, retries, errors,
all judged as before). ``tubemq._bridge._plain_py`` is the pure-Python twin: same classes, same
contract, same steps.
"""

from cpython.bytes cimport PyBytes_CheckExact, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItem
from cpython.object cimport PyObject
from libc.stdint cimport int64_t, uint32_t

from tubemq.codec.compiled cimport c_encode_send, c_send_result

from tubemq._bridge.channel import _SEND_FLAGS as _FLAGS
from tubemq._bridge.channel import _STALE_CHECK_AFTER as _STALE
from tubemq.errors import DecodeError, FrameError
from tubemq.protocol.constants import MAX_MAX_MSG_SIZE
from tubemq.types import SendResult

cdef extern from "pythread.h":
    unsigned long PyThread_get_thread_ident() nogil

import time

cdef object _monotonic = time.monotonic
cdef object _SEND_RESULT = SendResult

cdef double _STALE_CHECK_AFTER = _STALE
cdef Py_ssize_t _MAX_MSG = MAX_MAX_MSG_SIZE
cdef int _SEND_FLAGS = _FLAGS

implementation = "cython"


cdef class Leg:
    """One partition of a route and this thread's channel to its broker, with the socket's bound
    methods and the channel's read buffers looked up once."""
    cdef readonly object part
    cdef readonly object channel
    cdef readonly int64_t partition_id
    cdef readonly object broker_id
    cdef object sendall
    cdef object recv_into
    cdef object buf
    cdef object view
    cdef object decoder

    def __init__(self, part, channel):
        self.part = part
        self.channel = channel
        self.partition_id = part.partition_id
        self.broker_id = part.broker_id
        sock = channel.sock
        self.sendall = sock.sendall
        self.recv_into = sock.recv_into
        self.buf = channel._buf
        self.view = channel._view
        self.decoder = channel._decoder


cdef class PlainRoute:
    """One thread's route for one topic: valid while ``gen`` equals the session's ``route_gen`` and
    none of its channels is closed. Round-robin over its legs with this thread's own counter."""
    cdef readonly str topic
    cdef readonly object gen
    cdef readonly tuple legs
    cdef readonly Py_ssize_t max_size
    cdef Py_ssize_t n
    cdef readonly Py_ssize_t rr  # the leg the last send took (a rebuilt route goes on from it)

    def __init__(self, str topic, gen, legs, Py_ssize_t max_size, Py_ssize_t start):
        self.topic = topic
        self.gen = gen
        self.legs = tuple(legs)
        self.n = len(self.legs)
        if not self.n:
            raise ValueError("a route needs at least one partition")
        self.max_size = max_size
        self.rr = start % self.n


cdef class PlainSender:
    """The compiled blocking send of one producer (see the module docstring).

    ``bridge`` provides: ``core``, ``buffer``, ``_local`` (the threads' lanes), ``_loop_ident``,
    ``_rpc_timeout``, and the Python steps ``_plain_route(lane, topic)`` (build a route),
    ``_channel_for(lane, part, now)`` (an idle channel checked or replaced) and
    ``_resume_plain(...)`` (what follows a write that did not end in a stored answer).
    """
    cdef object core
    cdef object session
    cdef object quality
    cdef object buffer
    cdef object local
    cdef unsigned long loop_ident
    cdef double rpc_timeout
    cdef object lock_acquire
    cdef object lock_release
    cdef object build_route
    cdef object fresh_channel
    cdef object resume
    cdef object abandon
    cdef object key_index
    cdef object client_id
    cdef int64_t sent_addr
    cdef int64_t timeout_ms
    # messages sent and acknowledged here, and their bytes (under the shared lock; see figures())
    cdef int64_t n_sent
    cdef int64_t n_bytes
    cdef int64_t n_acked
    cdef object lock

    def __init__(self, bridge, key_index):
        core = bridge.core
        self.core = core
        self.session = core.session
        self.quality = core.quality
        self.buffer = bridge.buffer
        self.local = bridge._local
        self.loop_ident = bridge._loop_ident or 0
        self.rpc_timeout = bridge._rpc_timeout
        lock = core._ext_lock
        if bridge.buffer._lock is not lock:
            raise ValueError("the send buffer and the producer core must share one lock")
        self.lock = lock
        self.lock_acquire = lock.acquire
        self.lock_release = lock.release
        self.build_route = bridge._plain_route
        self.fresh_channel = bridge._channel_for
        self.resume = bridge._resume_plain
        self.abandon = bridge._abandon_plain
        self.key_index = key_index
        self.client_id = core.client_id
        self.sent_addr = core.sent_addr
        self.timeout_ms = core.timeout_ms

    def send(self, topic, data, key):
        """The SendResult of a plain send done here, or None when it is not that case (nothing was
        taken or written: the general route sends it). Raises the typed failure of a send it made."""
        cdef Py_ssize_t n, i
        cdef PlainRoute route
        cdef Leg leg
        cdef PyObject* found
        cdef double now
        cdef uint32_t serial
        cdef object lane, channel, frame, waiter, session, core, buffer, auth, route_obj
        cdef bint sample = False
        cdef object payload = None, result = None, error = None
        cdef bint unsent = False, taken = False
        if not PyBytes_CheckExact(data) or type(topic) is not str:
            return None
        if PyThread_get_thread_ident() == self.loop_ident:
            return None  # (send() refuses it there)
        n = PyBytes_GET_SIZE(data)
        if n <= 0 or n > _MAX_MSG:
            return None
        try:
            lane = self.local.lane
        except AttributeError:
            return None
        if lane.submitted != lane.finished:
            return None  # this thread's send_async messages must not be overtaken
        session = self.session
        found = PyDict_GetItem(lane.routes, topic)
        if (found is NULL or type(<object>found) is not PlainRoute
                or (<PlainRoute><object>found).gen != session.route_gen):
            route_obj = self.build_route(lane, topic)
            if route_obj is None:
                return None
            route = <PlainRoute?>route_obj
        else:
            route = <PlainRoute><object>found
        if n > route.max_size or self.quality._until:
            return None
        if key is None:
            route.rr += 1
            if route.rr >= route.n:
                route.rr = 0
            i = route.rr
        else:
            try:
                i = self.key_index(key, route.n)
            except Exception:  # a bad key: the general route reports it
                return None
        leg = <Leg?>route.legs[i]
        channel = leg.channel
        now = _monotonic()
        if channel.closed or now - <double>channel.last_used >= _STALE_CHECK_AFTER:
            # a channel dropped since the route was built, or idle: checked, replaced, route rebuilt
            if channel.closed or self.fresh_channel(lane, leg.part, now) is not channel:
                route_obj = self.build_route(lane, topic)
                if route_obj is None:
                    return None
                route = <PlainRoute?>route_obj
                leg = <Leg?>route.legs[i if i < route.n else 0]
                channel = leg.channel
                if channel.closed:
                    return None
        # one lock round: a buffer slot and the count close() and flush() wait for
        core = self.core
        buffer = self.buffer
        self.lock_acquire()
        try:
            if not (core.closed or buffer.closed) and buffer._used < buffer.max_pending:
                buffer._used += 1
                core._ext += 1
                taken = True
        finally:
            self.lock_release()
        if not taken:
            return None
        try:
            serial = (<uint32_t>channel.serial) + 1
            channel.serial = serial
            auth = session.auth_token
            frame = c_encode_send(serial, <str>self.client_id, route.topic, leg.partition_id, data, 0,
                                  self.sent_addr, session.visit_token, None, None, auth if auth else None, -1,
                                  self.timeout_ms, 3, 3)
            try:
                if <double>channel._timeout != self.rpc_timeout:
                    channel._set_timeout(self.rpc_timeout)
                leg.sendall(frame, _SEND_FLAGS)
            except OSError as exc:
                unsent = True
                error = exc
            if not unsent:
                channel.last_used = now
                channel.bytes_sent += PyBytes_GET_SIZE(frame)
                payload = self._read(leg, channel, serial, now)
                if isinstance(payload, BaseException):
                    error = payload
                    payload = None
                else:
                    try:
                        result = c_send_result(payload, _SEND_RESULT, route.topic, leg.part, key)
                    except DecodeError:
                        result = None
        except BaseException:
            self.abandon(lane, channel, n, now)
            raise
        if unsent:
            return self.resume(lane, leg.part, channel, route.topic, data, key, now, None, error, True)
        if result is None:  # a refusal, a malformed answer or an error: judged by the general steps
            return self.resume(lane, leg.part, channel, route.topic, data, key, now, payload, error, False)
        if self.quality._failures:
            self.quality.success(leg.broker_id)
        # one lock round: the slot back, the count down, the figures up
        waiter = None
        self.lock_acquire()
        try:
            buffer._used -= 1
            if buffer._thread_waiters:
                buffer._cond.notify()
            if buffer._task_waiters:
                waiter = buffer._task_waiters.popleft()
            core._ext -= 1
            self.n_sent += 1
            self.n_bytes += n
            self.n_acked += 1
            sample = (self.n_acked & 7) == 1  # one in 8, the first included
        finally:
            self.lock_release()
        if waiter is not None:
            buffer._wake(waiter)
        if sample:
            core._latency.observe(_monotonic() - now)
        return result

    def figures(self):
        """(messages sent, their bytes, messages acknowledged) by this route, for the producer's
        metrics (the general route counts its own in the core)."""
        with self.lock:
            return self.n_sent, self.n_bytes, self.n_acked


    cdef object _read(self, Leg leg, object channel, uint32_t serial, double now):
        """The payload (bytes) of the answer to ``serial``, or the typed error that ended the wait
        (the channel's own messages); bounded by ``rpc_timeout`` from ``now``."""
        cdef double deadline = now + self.rpc_timeout, left
        cdef Py_ssize_t got
        while True:
            try:
                got = leg.recv_into(leg.buf)
            except (BlockingIOError, TimeoutError):
                return channel._timed_out(serial, self.rpc_timeout)
            except OSError as exc:
                return channel._lost(exc)
            if not got:
                return channel._lost(None)
            channel.bytes_received += got
            try:
                frames = leg.decoder.feed(leg.view[:got])
            except FrameError as exc:
                return channel._malformed(bytes(leg.view[:got]), exc)
            for answer in frames:
                if (<tuple>answer)[0] == serial:
                    return (<tuple>answer)[1]
            left = deadline - <double>_monotonic()
            if left <= 0:
                return channel._timed_out(serial, self.rpc_timeout)
            if left < <double>channel._timeout:
                channel._set_timeout(left)

