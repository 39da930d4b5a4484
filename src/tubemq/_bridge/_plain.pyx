# cython: language_level=3
"""The blocking channel's write and read loops, and the blocking ``Producer.send``'s common case, compiled.

Why: after every wake-up from ``recv`` the Python work of a round trip costs several times what it does
hot, and a raw loop (pre-encoded frames, ``sendall`` + ``recv``) does almost none. So the two loops every
blocking round trip runs (:func:`write_frame`, :func:`read_answer`: the only ones; a
:class:`~tubemq._bridge.channel.BlockingChannel` calls them for its ``write`` / ``read``) and the whole
common send (:class:`PlainSender`) are C functions. The send is the engine's sequence
(:class:`~tubemq.producer.engine.ProducerEngine`) with its decisions taken through its public methods:
a cached route of this thread for the topic (its partitions and this thread's channel to each, valid
while the session's ``route_gen`` has not moved), a slot (``admit_now``), the frame (``plain_frame``),
the socket's own ``sendall`` / ``recv_into`` (which release the GIL while blocked), the answer decoded
straight to the :class:`~tubemq.types.SendResult`, and the outcome (``settle_plain``).

Anything else returns None before anything is taken or written (the general route sends it), or, once
a slot is taken, hands the message as a job to the bridge's ``resume`` (refusals, retries, errors, all
judged by the engine). ``tubemq._bridge._plain_py`` is the pure-Python twin: same functions, classes,
contract and steps.
"""

from cpython.bytes cimport PyBytes_CheckExact, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItem
from cpython.object cimport PyObject
from libc.stdint cimport int64_t, uint32_t

from tubemq.codec.compiled cimport c_send_result

import socket
import time

from tubemq.errors import DecodeError, FrameError
from tubemq.protocol.constants import MAX_MAX_MSG_SIZE
from tubemq.types import SendResult

cdef extern from "pythread.h":
    unsigned long PyThread_get_thread_ident() nogil

#: send() flags: MSG_NOSIGNAL where it exists (Linux); elsewhere SIGPIPE is not raised by sockets
#: (macOS sets SO_NOSIGPIPE) or does not exist (Windows)
SEND_FLAGS = getattr(socket, "MSG_NOSIGNAL", 0)
#: a channel idle longer than this is checked for a peer that closed it before it is written to (s)
STALE_CHECK_AFTER = 0.001

cdef object _monotonic = time.monotonic
cdef object _SEND_RESULT = SendResult

cdef double _STALE_CHECK_AFTER = STALE_CHECK_AFTER
cdef Py_ssize_t _MAX_MSG = MAX_MAX_MSG_SIZE
cdef int _SEND_FLAGS = SEND_FLAGS

implementation = "cython"


cdef object c_write(object channel, bytes frame, double timeout, double now):
    try:
        if <double>channel.timeout != timeout:
            channel.set_timeout(timeout)
        channel.sock.sendall(frame, _SEND_FLAGS)
    except OSError as exc:
        return exc
    channel.last_used = now
    channel.bytes_sent += PyBytes_GET_SIZE(frame)
    return None


cdef object c_read(object channel, uint32_t serial, double timeout, double now):
    cdef double deadline = now + timeout, left
    cdef Py_ssize_t got
    cdef object recv_into = channel.sock.recv_into
    cdef object buf = channel.buf
    cdef object view = channel.view
    cdef object feed = channel.decoder.feed
    if <double>channel.timeout != timeout:
        channel.set_timeout(timeout)
    while True:
        try:
            got = recv_into(buf)
        except (BlockingIOError, TimeoutError):
            return channel.timed_out(serial, timeout)
        except OSError as exc:
            return channel.lost(exc)
        if not got:
            return channel.lost(None)
        channel.bytes_received += got
        try:
            frames = feed(view[:got])
        except FrameError as exc:
            return channel.malformed(bytes(view[:got]), exc)
        for answer in frames:
            if (<tuple>answer)[0] == serial:
                return (<tuple>answer)[1]
        left = deadline - <double>_monotonic()
        if left <= 0:
            return channel.timed_out(serial, timeout)
        if left < <double>channel.timeout:
            channel.set_timeout(left)


def write_frame(channel, bytes frame, double timeout, double now):
    """Write ``frame`` whole on ``channel`` (a :class:`~tubemq._bridge.channel.BlockingChannel`) within
    ``timeout``; the OSError when it was not (wholly) written: then the broker cannot have stored it."""
    return c_write(channel, frame, timeout, now)


def read_answer(channel, uint32_t serial, double timeout, double now):
    """The payload of the answer to ``serial`` on ``channel``, or the typed error that ended the wait
    (the channel's own: timed out, lost, malformed); bounded by ``timeout`` from ``now``. Answers of
    other serials (late ones) are dropped."""
    return c_read(channel, serial, timeout, now)


cdef class Leg:
    """One partition of a route and this thread's channel to its broker."""
    cdef readonly object part
    cdef readonly object channel
    cdef readonly int64_t partition_id
    cdef readonly object broker_id

    def __init__(self, part, channel):
        self.part = part
        self.channel = channel
        self.partition_id = part.partition_id
        self.broker_id = part.broker_id


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

    ``build_route(lane, topic)`` builds a route, ``fresh_channel(lane, part, now)`` checks or replaces
    an idle channel, ``resume(lane, job, channel, payload, error, unsent)`` takes a message whose first
    attempt did not end stored, ``abandon(lane, channel, job, exc)`` one cut short by an exception.
    """
    cdef object engine
    cdef object session
    cdef object quality
    cdef object local
    cdef unsigned long loop_ident
    cdef double rpc_timeout
    cdef object build_route
    cdef object fresh_channel
    cdef object resume
    cdef object abandon
    cdef object key_index
    cdef object admit_now
    cdef object plain_frame
    cdef object settle_plain
    cdef object plain_job

    def __init__(self, engine, local, loop_ident, double rpc_timeout, build_route, fresh_channel, resume, abandon,
                 key_index):
        self.engine = engine
        self.session = engine.session
        self.quality = engine.quality
        self.local = local
        self.loop_ident = loop_ident or 0
        self.rpc_timeout = rpc_timeout
        self.build_route = build_route
        self.fresh_channel = fresh_channel
        self.resume = resume
        self.abandon = abandon
        self.key_index = key_index
        self.admit_now = engine.admit_now
        self.plain_frame = engine.plain_frame
        self.settle_plain = engine.settle_plain
        self.plain_job = engine.plain_job

    def send(self, topic, data, key):
        """The SendResult of a plain send done here, or None when it is not that case (nothing was
        taken or written: the general route sends it). Raises the typed failure of a send it made."""
        cdef Py_ssize_t n, i
        cdef PlainRoute route
        cdef Leg leg
        cdef PyObject* found
        cdef double now
        cdef uint32_t serial
        cdef object lane, channel, route_obj, name, result
        cdef object payload = None, error = None
        cdef bint unsent = False
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
        found = PyDict_GetItem(lane.routes, topic)
        if (found is NULL or type(<object>found) is not PlainRoute
                or (<PlainRoute><object>found).gen != self.session.route_gen):
            route_obj = self.build_route(lane, topic)
            if route_obj is None:
                return None
            route = <PlainRoute?>route_obj
        else:
            route = <PlainRoute><object>found
        if n > route.max_size or self.quality.until:
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
        if not self.admit_now():
            return None  # full or closed: the general route waits or refuses
        name = route.topic
        try:
            serial = (<uint32_t>channel.serial) + 1
            channel.serial = serial
            error = c_write(channel, self.plain_frame(serial, name, leg.partition_id, data), self.rpc_timeout, now)
            if error is None:
                payload = c_read(channel, serial, self.rpc_timeout, now)
                if PyBytes_CheckExact(payload):
                    try:
                        result = c_send_result(payload, _SEND_RESULT, name, leg.part, key)
                    except DecodeError:
                        result = None
                    if result is not None:
                        self.settle_plain(leg.broker_id, n, now)
                        return result
                else:
                    error = payload
                    payload = None
            else:
                unsent = True
        except BaseException as exc:
            self.abandon(lane, channel, self.plain_job(name, data, key, leg.part, now, True), exc)
            raise
        # a refusal, a malformed answer, an error, or nothing written: the general steps from here
        return self.resume(lane, self.plain_job(name, data, key, leg.part, now, not unsent), channel, payload,
                           error, unsent)
