"""The blocking producer's thread side: two drivers of the producer engine on callers' threads.

``send`` (blocking; a plain message, the common case, first tries :attr:`ProducerBridge.plain`: the
same sequence in one compiled call, :mod:`tubemq._bridge._plain`, over a route this thread caches per
topic until the session's ``route_gen`` moves). The sequence, once (:meth:`ProducerBridge._drive`):
the engine admits the message (a buffer slot, its deadline); then, when this thread has no
``send_async`` of its own still outstanding (it must not overtake them) and the engine routes it
without waiting, each attempt is a round trip on this thread over its own :class:`BlockingChannel`
to the partition's broker: the engine's frame, write, read, the engine's judgement (a result, an
error, or a resend after the backoff); the outcome is settled with the engine. The event loop is
neither woken nor waited for. Otherwise, or when the channel cannot be opened or written (nothing
was stored), the message goes to the event-loop driver and the thread waits on a :class:`Waiter`.

``send_async``: the engine admits the message, the job goes to this bridge's inbox; the loop thread
drains the inbox in batches (``LoopDriver.accept_batch``). The loop is woken with
``call_soon_threadsafe`` only when nothing else will make it drain: a drain already scheduled, or
jobs of this bridge on the wire whose completion drains the inbox (:meth:`_done`), spare the wake-up
(at most ``_MAX_DRAIN_DELAY`` late). The inbox, the drain flag and the wire count share one lock,
so the hand-off holds without the GIL (free-threaded builds).

Completion on the loop (:meth:`_done`, after the engine settled the job): the thread's order count,
the callback, then the future or waiter.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import ClientClosedError, TubeMQError, TubeMQTimeoutError
from ..net.loop import LoopThread
from ..producer.engine import RETRY
from ..producer.message import Job, SendCallback, check_callback, make_job, run_callback
from ..producer.router import key_index
from ..types import SendResult
from .channel import STALE_CHECK_AFTER, BlockingChannel, Unsent
from .channel import plain as _plain
from .futures import SendFuture, Waiter

if TYPE_CHECKING:
    from ..producer.aio import Producer as AsyncProducer

log = logging.getLogger("tubemq.producer")

_monotonic = time.monotonic
_get_ident = threading.get_ident

#: Topics a thread keeps a route for (the cache is cleared when full).
_MAX_ROUTES = 1024

#: A submitter wakes the loop itself when the inbox was last drained longer ago than this (s).
_MAX_DRAIN_DELAY = 0.002

#: How long past a message's deadline a thread waits for the loop to settle it before it gives up
#: itself (the loop normally settles it at the deadline) (s).
_SETTLE_SLACK = 0.25


class _Lane:
    """One thread's state in one producer: its broker channels, its routes for the compiled send
    (topic -> route, see :mod:`tubemq._bridge._plain`), and how many of its ``send_async`` messages
    are not finished yet, as two single-writer counters (``submitted``: this thread only;
    ``finished``: the loop thread only), so neither side needs a lock: a stale ``finished`` read by
    the thread is too low, never too high, which only sends a blocking send through the loop."""

    __slots__ = ("__weakref__", "channels", "finished", "routes", "submitted")

    def __init__(self) -> None:
        self.submitted = 0
        self.finished = 0
        self.channels: dict[str, BlockingChannel] = {}
        self.routes: dict[str, Any] = {}


class ProducerBridge:
    """The thread side of one :class:`tubemq.Producer`; see the module docstring."""

    def __init__(self, client: AsyncProducer, lt: LoopThread) -> None:
        self.engine = engine = client.engine
        self.driver = client.driver
        self.lt = lt
        self.loop = self.driver.loop
        self._local = threading.local()
        self._lock = threading.Lock()  # guards the inbox, the drain flag, _wire and the channel set
        self._inbox: collections.deque[Job] = collections.deque()
        self._drain_scheduled = False
        self._last_drain = 0.0
        self._wire = 0  # jobs of this bridge accepted by the loop and not finished
        self._channels: weakref.WeakSet[BlockingChannel] = weakref.WeakSet()
        self._aborted = False
        self._loop_thread = lt.thread
        self._loop_ident = lt.thread.ident
        c = client.config
        self._connect_timeout = c.connect_timeout_ms / 1000.0
        self._rpc_timeout = c.rpc_timeout_ms / 1000.0
        self._serialize = c.serialize_hook  # value_serializer / key_serializer, None without them
        self._closed_io: dict[str, list[int]] = {}  # address -> [bytes sent, bytes received] of dropped channels
        self._fail_lock = threading.Lock()
        engine.attach(self)
        #: the compiled (or twin) common blocking send: ``plain.send(topic, data, key)``
        self.plain = _plain.PlainSender(engine, self._local, self._loop_ident or 0, self._rpc_timeout,
                                        self._plain_route, self._channel_for, self._resume_plain,
                                        self._abandon_plain, key_index)

    def _lane(self) -> _Lane:
        try:
            return self._local.lane  # type: ignore[no-any-return]
        except AttributeError:
            lane = self._local.lane = _Lane()
            return lane

    def _on_loop_thread(self) -> bool:
        """True on this client's event-loop thread. The ident alone is not enough: a thread started
        after the loop thread ended (a closed producer) may be given the same ident."""
        return _get_ident() == self._loop_ident and threading.current_thread() is self._loop_thread

    # ------------------------------------------------------------------ send_async

    def send_async(self, topic: str, data: bytes, attributes: Mapping[str, Any] | None, stream_id: str | None,
                   msg_time: Any, key: Any, callback: SendCallback | None) -> SendFuture[SendResult]:
        engine = self.engine
        if engine.closed:
            raise ClientClosedError("producer is closed")
        job = make_job(topic, data, attributes, stream_id, msg_time, key, self._done, self._serialize)
        if callback is not None:
            job.cb = check_callback(callback)
        fut: SendFuture[SendResult] = SendFuture()
        fut.on_wait = self._kick
        job.fut = fut
        if not engine.try_admit(job):
            engine.buffer.take(self._on_loop_thread())  # wait for room (refused on the loop thread)
            engine.start_clock(job)
        lane = job.lane = self._lane()
        lane.submitted += 1
        self._submit(job)
        return fut

    def _submit(self, job: Job) -> None:
        """Queue ``job`` for the loop thread (any thread; the engine admitted it)."""
        with self._lock:
            self._inbox.append(job)
            if self._drain_scheduled or (self._wire and _monotonic() - self._last_drain < _MAX_DRAIN_DELAY):
                return
            self._drain_scheduled = True
        self._wake()

    def _kick(self) -> None:
        """Make the loop drain the inbox now if jobs wait there (a thread is about to block on one)."""
        with self._lock:
            if not self._inbox or self._drain_scheduled:
                return
            self._drain_scheduled = True
        self._wake()

    def _wake(self) -> None:
        try:
            self.loop.call_soon_threadsafe(self._drain)
        except RuntimeError:  # the loop is closed: close() failed everything it knew of; fail the rest
            with self._lock:
                jobs, self._inbox = self._inbox, collections.deque()
                self._wire += len(jobs)
            # no loop thread completes anything any more: these threads take its place, one at a time
            with self._fail_lock:
                for job in jobs:
                    self.engine.settle(job, None, ClientClosedError("producer is closed"))

    def _drain(self) -> None:
        """Loop thread: hand everything queued to the loop driver, in order."""
        with self._lock:
            jobs, self._inbox = self._inbox, collections.deque()
            self._drain_scheduled = False
            self._last_drain = time.monotonic()
            self._wire += len(jobs)
        if jobs:
            self.driver.accept_batch(jobs)

    def _done(self, job: Job, result: SendResult | None, exc: BaseException | None) -> None:
        """A job that took the loop's route was settled (loop thread, exactly once per job; after the
        loop closed, the threads that find it closed, under ``_fail_lock``)."""
        lane = job.lane
        if lane is not None:
            lane.finished += 1
        if job.cb is not None:
            run_callback(job, result, exc)
        job.fut.complete(result, exc)
        with self._lock:
            self._wire -= 1
            drain = bool(self._inbox) and not self._drain_scheduled
            if drain:
                self._drain_scheduled = True
        if drain:
            try:
                self.loop.call_soon(self._drain)
            except RuntimeError:  # the loop is closed (see _wake): nothing is left to drain there
                pass

    def drain_now(self) -> None:
        """Loop thread: hand over whatever is queued now (before a flush or close counts what is left)."""
        self._drain()

    # ------------------------------------------------------------------ send (blocking)

    def send(self, topic: str, data: bytes, attributes: Mapping[str, Any] | None, stream_id: str | None,
             msg_time: Any, key: Any, timeout: float | None) -> SendResult:
        if self._on_loop_thread():
            raise TubeMQError("Producer.send() would block the client's own event-loop thread (called from "
                              "a callback?): use send_async() there")
        engine = self.engine
        if engine.closed:
            raise ClientClosedError("producer is closed")
        job = make_job(topic, data, attributes, stream_id, msg_time, key, None, self._serialize)
        engine.buffer.take(False)  # a slot, waiting for room up to max_block_ms
        engine.start_clock(job, None if timeout is None else max(timeout, 0.0))
        lane = self._lane()
        if lane.submitted != lane.finished:  # this thread's own send_async messages must not be overtaken
            return self._via_loop(job)
        return self._drive(job, lane, None)

    def _drive(self, job: Job, lane: _Lane, first: tuple[Any, bytes | None, BaseException | None] | None
               ) -> SendResult:
        """The rest of an admitted ``job``'s send on this thread: its attempts here, then its outcome
        settled; or the loop's route when it cannot go on here (nothing was stored by the attempts
        made here). ``first``: an attempt already made, to be judged first."""
        engine = self.engine
        try:
            result = self._attempts(job, lane, first)
        except BaseException as exc:
            engine.settle(job, None, exc)
            raise
        if result is None:
            return self._via_loop(job)
        engine.settle(job, result, None, direct=True)
        return result

    def _attempts(self, job: Job, lane: _Lane,
                  first: tuple[Any, bytes | None, BaseException | None] | None) -> SendResult | None:
        """The attempts of ``job`` on this thread until an outcome; None when it must take the loop's
        route (nothing was stored by the attempts made here); raises the failure."""
        engine = self.engine
        while True:
            if first is not None:
                part, payload, error = first
                first = None
            else:
                part = engine.route_direct(job.topic, job.size, job.key)
                if part is None:
                    return None
                now = _monotonic()
                channel = self._channel_for(lane, part, now)
                if channel is None:
                    return None
                left = job.deadline - now
                if left <= 0:
                    raise engine.expired(job, "before an attempt could be written")
                job.part = part
                payload = None
                error = None
                try:
                    payload = channel.round_trip(engine.frame, job, left if left < self._rpc_timeout
                                                 else self._rpc_timeout)
                except Unsent:
                    self._drop(lane, channel)
                    return None
                except TubeMQError as exc:
                    error = self._broken(lane, channel, exc)
                engine.written(job)
                if error is None:  # the common case first: stored
                    result = engine.stored(job, part, payload)  # type: ignore[arg-type]
                    if result is not None:
                        return result
            judged = engine.judge(job, part, payload, error)
            if type(judged) is SendResult:
                return judged  # type: ignore[return-value]
            if judged is not RETRY:
                raise judged  # type: ignore[misc]
            time.sleep(max(0.0, min(engine.backoff, engine.left(job))))
            problem = engine.retry_error(job)
            if problem is not None:
                raise problem

    def _via_loop(self, job: Job) -> SendResult:
        """Hand an admitted ``job`` to the loop driver and wait for its outcome (the loop settles it by
        its deadline; this thread gives up a little later at the latest)."""
        waiter = Waiter()
        job.fut = waiter
        job.done = self._done
        self._submit(job)
        self._kick()
        wait = job.deadline - job.t0
        left = job.deadline + _SETTLE_SLACK - _monotonic()
        if not waiter.lock.acquire(True, min(max(left, 0.0), threading.TIMEOUT_MAX)):
            raise TubeMQTimeoutError(f"no answer for the message to topic {job.topic!r} within {wait:g} s "
                                     "(it may still be sent)")
        if waiter.exc is not None:
            raise waiter.exc
        return waiter.result  # type: ignore[no-any-return]

    # ------------------------------------------------------------------ the compiled send's steps

    def _plain_route(self, lane: _Lane, topic: str) -> Any:
        """This thread's route for ``topic`` (built now, cached in ``lane``), or None when the topic
        is not routable on this thread now (not published yet, no partition, a channel that cannot
        be opened, a closed producer, TLS or a user partitioner: the general route then)."""
        engine = self.engine
        session = engine.session
        gen = session.route_gen  # read before what it covers: a change after this shows as a new gen
        if engine.closed or not engine.direct_ok:
            return None
        name = topic.strip()
        parts = session.partitions.get(name)
        if not parts or name not in session.topics:
            return None
        now = _monotonic()
        legs = []
        for part in parts:
            channel = self._channel_for(lane, part, now)
            if channel is None:
                return None
            legs.append(_plain.Leg(part, channel))
        routes = lane.routes
        previous = routes.get(topic)
        # a rebuilt route goes on where the one it replaces stopped, a thread's first route where the
        # topic's shared round-robin is (each thread one step further): the spread stays even
        start = previous.rr if previous is not None else engine.router.start_for(name)
        route = _plain.PlainRoute(name, gen, legs, session.topic_max_sizes.get(name, session.max_msg_size), start)
        if len(routes) >= _MAX_ROUTES:
            routes.clear()
        routes[topic] = route
        return route

    def _resume_plain(self, lane: _Lane, job: Job, channel: BlockingChannel, payload: bytes | None,
                      error: BaseException | None, unsent: bool) -> SendResult:
        """What follows a compiled send whose write failed (``unsent``: nothing stored) or whose answer
        was not a stored message (a refusal, a malformed answer, an error): the general sequence."""
        if unsent:
            self._drop(lane, channel)
            return self._drive(job, lane, None)
        if error is not None:  # (a channel's read error: always a TubeMQError)
            error = self._broken(lane, channel, error)  # type: ignore[arg-type]
        return self._drive(job, lane, (job.part, payload, error))

    def _abandon_plain(self, lane: _Lane, channel: BlockingChannel, job: Job, exc: BaseException) -> None:
        """A compiled send was cut short by an unexpected exception (KeyboardInterrupt, MemoryError):
        its channel is dropped (an answer may still come on it) and the message settled as failed."""
        self._drop(lane, channel)
        self.engine.settle(job, None, exc)

    # ------------------------------------------------------------------ channels

    def _channel_for(self, lane: _Lane, part: Any, now: float) -> BlockingChannel | None:
        """This thread's channel to ``part``'s broker, checked when idle, opened when missing; None if
        it cannot be opened (the loop's route then)."""
        address = part.address
        channel = lane.channels.get(address)
        if channel is None or (now - channel.last_used >= STALE_CHECK_AFTER and channel.stale()):
            channel = self._channel(lane, address, channel)
            if channel is None:
                return None
        return channel

    def _channel(self, lane: _Lane, address: str, dead: BlockingChannel | None) -> BlockingChannel | None:
        """A new channel of this thread to ``address`` (replacing ``dead``); None if it cannot be opened."""
        if dead is not None:
            self._drop(lane, dead)
        if self.driver.session.pool.is_backing_off(address):
            return None  # the loop's route waits for the broker (its connects back off)
        try:
            channel = BlockingChannel(address, min(self._connect_timeout, self._rpc_timeout), self._rpc_timeout)
        except TubeMQError as exc:
            log.debug("blocking channel to %s not opened (%s): sending through the loop", address, exc)
            return None
        with self._lock:
            if self._aborted:
                channel.close()
                return None
            self._channels.add(channel)
        lane.channels[address] = channel
        return channel

    def _broken(self, lane: _Lane, channel: BlockingChannel, exc: TubeMQError) -> BaseException:
        """A round trip failed after its write: the channel is dropped; the error to judge (the message
        may or may not be stored; ClientClosedError when close() cut it short)."""
        self._drop(lane, channel)
        if self._aborted:
            return ClientClosedError("producer closed before the broker answered; the message may or may not "
                                     "be stored")
        return exc

    def _drop(self, lane: _Lane, channel: BlockingChannel) -> None:
        if lane.channels.get(channel.address) is channel:
            del lane.channels[channel.address]
        with self._lock:
            self._channels.discard(channel)
            io = self._closed_io.setdefault(channel.address, [0, 0])
            io[0] += channel.bytes_sent
            io[1] += channel.bytes_received
        channel.close()

    # ------------------------------------------------------------------ the engine's side figures

    def io(self, address: str) -> dict[str, int]:
        """Wire bytes of the threads' channels to ``address`` (open ones and dropped ones): added to the
        broker's connection figures in metrics snapshots. A channel whose thread ended is counted
        until it is collected (its bytes then leave the figures: UNCERTAIN whether worth a finalizer)."""
        with self._lock:
            sent, received = self._closed_io.get(address, (0, 0))
            channels = [c for c in self._channels if c.address == address]
        return {"bytes_sent": sent + sum(c.bytes_sent for c in channels),
                "bytes_received": received + sum(c.bytes_received for c in channels)}

    def queued(self) -> int:
        """Messages in the inbox, not handed to the loop yet."""
        return len(self._inbox)

    def abort(self) -> None:
        """The producer closes: no channel is used any more; blocked reads return now (any thread)."""
        with self._lock:
            self._aborted = True
            channels = list(self._channels)
            self._channels.clear()
        for channel in channels:
            channel.abort()

    @property
    def round_trips(self) -> int:
        """Messages acknowledged through a round trip on a caller's thread (tests, debugging)."""
        return self.engine.buffer.direct


__all__ = ["ProducerBridge"]
