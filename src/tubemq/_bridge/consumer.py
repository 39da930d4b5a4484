"""The blocking iterator's own fetches: ``for msg in consumer`` does the getMessage round trip on its thread.

Why: through the loop, one batch costs four thread hand-offs (the fetch worker's answer wakes a feed
task, the feed wakes the iterating thread, the iterating thread posts the confirm, the confirm wakes a
fetch worker) plus the asyncio machinery of a request (a future, a protocol callback, a frame decoder
fed by the loop). Measured on a 2-core VM draining a backlog of 100 B messages: about half of the
client's CPU per message went there, not into decoding or iteration (bench/RESULTS.md, "Blocking
iterator fetching on its own thread").

Here the iterating thread writes the getMessage request and reads the answer on its own blocking
socket (:class:`~tubemq._bridge.channel.BlockingChannel`, same client id, the consumer's rpc timeout),
and crosses to the loop thread once per batch, with a plain function (no Task): the loop thread
confirms the batch just iterated, opens the answer's envelope (its large copies come from the
loop thread's malloc arena: made on the main thread they made glibc trim and regrow the heap top per
answer) and hands it to the consumer engine (:meth:`~tubemq.consumer.engine.ConsumerEngine.step`:
the judgement the fetch workers' answers get too, back-offs, lost partitions, broker health, pause,
metrics), which gives back the batch and leases the next ready partitions. A channel presents the
consumer's tokens before its first getMessage (:meth:`~tubemq.consumer.engine.ConsumerEngine.opening`:
the broker serves reads only on a connection that did), and the engine judges no answer read on a
channel that did not. The lease's request is written before the batch goes to the caller and its answer
read when the caller asks for the next one: the broker works while the caller iterates, as it does
for the fetch workers' requests in flight (without it, a quiet 2-core machine drained a backlog
about a quarter slower than through the loop). The partition table is touched on the loop thread only; what crosses threads is
written before a lock is released and read after it is acquired (:class:`~tubemq._bridge.futures.Waiter`),
so nothing rests on the GIL.

While such an iterator runs, the consumer's fetch workers are suspended (a fetch of theirs already
running completes; its batch is delivered from the buffer first). Registration, heartbeats,
rebalances and their hooks, pause/resume, seek and close stay on the loop. A revoke waits for the
leased partition like for a fetch worker's (the lease is answered within the rpc timeout); close
shuts the sockets down, so a blocked read returns at once. Delivery is unchanged: a batch is
confirmed (locally: the commit rides on the partition's next getMessage, ``lastPackConsumed``) only
after it was iterated to its end; a crash before that redelivers it.

Up to ``fetch_concurrency`` getMessage requests are in flight, as with the loop's fetch workers (a
broker that is the bottleneck is never left idle while this thread decodes or iterates): each on a
channel of its own (a :class:`BlockingChannel` holds one request at a time), so a broker gets up to
that many sockets from this iterator. Answers are read in the order they arrive (``poll`` over the
channels waiting), so a slow broker does not hold up another's answers. Not used (the
:class:`~tubemq._bridge.feed.BatchFeed` route instead) with TLS, or when another iterator of the same
consumer already fetches this way.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import logging
import select
import time
from typing import TYPE_CHECKING, Any

from .. import codec
from ..consumer.engine import FETCH_METHOD, OPENING_METHOD
from ..errors import ClientClosedError, ConnectionLostError, TubeMQError, TubeMQTimeoutError
from ..net.connection import unwrap_response
from ..protocol.constants import ServiceType
from .channel import SERIAL_MASK, BlockingChannel, Unsent
from .futures import Waiter

if TYPE_CHECKING:
    from ..consumer import aio
    from ..consumer.engine import Lease
    from ..types import Batch

log = logging.getLogger("tubemq.consumer.direct")

#: (lease, the channel it was read on or None, the response payload or None, the error or None, when
#: the request was written)
Fetched = tuple["Lease", "BlockingChannel | None", "bytes | None", "BaseException | None", float]
#: (lease, the channel its request was written on or None, its serial, when written, the error or None)
Pending = tuple["Lease", "BlockingChannel | None", int, float, "BaseException | None"]
#: what a step on the loop thread gives: the batch to hand out, new leases, an error to raise
Step = tuple["Batch | None", "list[Lease]", "BaseException | None"]

#: bytes per ``recv``: a getMessage answer is up to a few hundred KiB; one read instead of several
_READ_SIZE = 256 * 1024
#: how often a thread waiting for the loop checks that the loop still runs (s)
_HOP_CHECK = 0.5
#: longest wait on the loop thread for a ready partition before the iterator looks again (s)
_IDLE_WAIT = 0.05
#: an idle channel unused this long (s) is checked for a peer that closed it before it is written to
_STALE_AFTER = 1.0
_HAS_POLL = hasattr(select, "poll")
_POLL_IN = getattr(select, "POLLIN", 1) | getattr(select, "POLLERR", 8) | getattr(select, "POLLHUP", 16)


def _opened_envelope(data: bytes | None, exc: BaseException | None) -> tuple[bytes | None, BaseException | None]:
    """The RspResponseBody.data of a raw answer payload, or the error it carries. Loop thread: the
    envelope's large transient copies then come from that thread's malloc arena (made on the main
    thread, the heap top is trimmed and grown again per answer)."""
    if data is None:
        return None, exc
    try:
        return unwrap_response(data), None
    except TubeMQError as err:
        return None, err


def _first_readable(channels: list[BlockingChannel], timeout: float) -> int | None:
    """Index of the first of ``channels`` with bytes (or EOF, or an error) to read within ``timeout``
    seconds, or None. ``poll`` where there is one (no descriptor limit), else ``select`` (Windows)."""
    fds = [c.sock.fileno() for c in channels]
    if _HAS_POLL:
        poller = select.poll()
        for fd in fds:
            poller.register(fd, _POLL_IN)
        ready = {fd for fd, _ in poller.poll(max(0, int(timeout * 1000) + 1))}
    else:
        ready = set(select.select(fds, [], [], max(0.0, timeout))[0])
    for i, fd in enumerate(fds):
        if fd in ready:
            return i
    return None


class DirectFeed:
    """Batches for one blocking ``for msg in consumer`` loop, fetched on the iterating thread; see the
    module docstring. One instance per iteration, used by one thread (``abort`` from any)."""

    def __init__(self, lt: Any, consumer: aio.Consumer) -> None:
        self._aio = consumer
        self._core = consumer.core
        self._engine = consumer.core.engine
        self._loop: asyncio.AbstractEventLoop = lt.loop
        cfg = consumer.config
        self._rpc_timeout_ms = cfg.rpc_timeout_ms
        self._rpc_timeout = cfg.rpc_timeout_ms / 1000.0
        self._connect_timeout = cfg.connect_timeout_ms / 1000.0
        #: getMessage requests this iterator keeps in flight at most
        self._limit = max(1, cfg.fetch_concurrency)
        #: a hop to the loop thread that takes longer than this is given up (the loop is stuck or gone)
        self._hop_limit = self._rpc_timeout + 30.0
        #: every open channel (for abort and stop), and per broker those with no request waiting
        self._channels: list[BlockingChannel] = []
        self._idle: dict[str, list[BlockingChannel]] = {}
        self._pending: collections.deque[Pending] = collections.deque()
        self._aborted = False
        self._started = False

    # ---- loop thread
    def _begin(self) -> bool:
        """Take over the fetching; False when another iterator already did (or the consumer closes)."""
        return self._core.fetch_elsewhere(self.abort)

    def _end(self, fetched: list[Fetched]) -> None:
        """The iteration stopped: the answers to requests written ahead go to the head of the buffer
        (in the order they were read), not delivered (the next poll or iteration hands them out); the
        workers fetch again."""
        batches = [b for b in (self._judge(f) for f in fetched) if b is not None]
        for batch in reversed(batches):
            self._engine.put_back(batch)
        self._core.fetch_here(self.abort)

    def _judge(self, fetched: Fetched) -> Batch | None:
        """The batch of a getMessage answer (the slot IN_FLIGHT), or None (released, backed off)."""
        lease, channel, data, exc, t0 = fetched
        data, exc = _opened_envelope(data, exc)
        return self._engine.answer(lease, channel, data, exc, t0)

    def _step(self, done: Batch | None, fetched: Fetched | None, room: int) -> Step:
        """Confirm ``done``, judge ``fetched``; the next batch and up to ``room`` new leases."""
        if fetched is None:
            return self._engine.step(done, None, None, None, None, 0.0, room)
        lease, channel, data, exc, t0 = fetched
        data, exc = _opened_envelope(data, exc)
        return self._engine.step(done, lease, channel, data, exc, t0, room)

    def _opened(self, channel: BlockingChannel, data: bytes) -> BaseException | None:
        data_or_none, exc = _opened_envelope(data, None)
        return self._engine.opened(channel, data_or_none, exc)

    async def _wait(self, timeout: float) -> Step:
        """Nothing ready: wait (bounded) until a partition is fetchable or a worker's batch arrives."""
        core = self._core
        end = self._loop.time() + timeout
        while True:
            out = self._step(None, None, self._limit)
            if out[0] is not None or out[1] or out[2] is not None or core.closing:
                return out
            left = end - self._loop.time()
            if left <= 0:
                return out
            await core.table.wait_ready(min(left, _IDLE_WAIT))

    # ---- iterating thread
    def _hop(self, fn: Any, *args: Any) -> Any:
        """``fn(*args)`` on the loop thread, waited for; ClientClosedError when the loop is gone."""
        w = Waiter()

        def run() -> None:
            try:
                w.result = fn(*args)
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
                w.exc = exc
            finally:
                w.lock.release()

        try:
            self._loop.call_soon_threadsafe(run)
        except RuntimeError:  # the loop closed
            raise ClientClosedError("consumer is closed") from None
        end = time.monotonic() + self._hop_limit
        while not w.lock.acquire(timeout=_HOP_CHECK):
            if not self._loop.is_running():  # stopped before it ran ``run`` (the consumer closed)
                raise ClientClosedError("consumer is closed")
            if time.monotonic() > end:
                raise TubeMQTimeoutError(f"the consumer's event loop did not answer within "
                                         f"{self._hop_limit:.0f} s")
        if w.exc is not None:
            raise w.exc
        return w.result

    def _wait_on_loop(self, timeout: float) -> Any:
        fut = asyncio.run_coroutine_threadsafe(self._wait(timeout), self._loop)
        try:
            return fut.result(timeout + self._hop_limit)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise TubeMQTimeoutError(f"the consumer's event loop did not answer within {self._hop_limit:.0f} s") \
                from None

    def _frame(self, serial: int, method: int, body: bytes) -> bytes:
        return codec.encode_request(serial, ServiceType.BROKER_READ, method, body, timeout_ms=self._rpc_timeout_ms)

    def _channel(self, address: str) -> BlockingChannel:
        """A channel to ``address`` with no request waiting on it: an idle one, else a new one."""
        idle = self._idle.get(address)
        while idle:
            channel = idle.pop()
            # idle a while (nothing was fetchable): the broker may have closed it meanwhile, and a
            # request written there would only fail after the fact, counted against the broker
            if time.monotonic() - channel.last_used < _STALE_AFTER or not channel.stale():
                return channel
            self._channels.remove(channel)
            channel.close()
        if self._aborted:
            raise ClientClosedError("consumer closed during the fetch")
        channel = BlockingChannel(address, self._connect_timeout, self._rpc_timeout, read_size=_READ_SIZE)
        self._channels.append(channel)
        if self._aborted:  # abort() ran between the check and the connect
            channel.abort()
        self._open(channel)
        return channel

    def _open(self, channel: BlockingChannel) -> None:
        """A new channel presents the consumer's tokens before its first fetch (the engine builds the
        request and judges the answer: :class:`~tubemq.consumer.links.Links`); raises what refused it."""
        try:
            body = self._hop(self._engine.opening, channel.address)
            channel.serial = serial = (channel.serial + 1) & SERIAL_MASK
            data = channel.exchange(self._frame(serial, OPENING_METHOD, body), serial, self._rpc_timeout,
                                    time.monotonic())
            refused = self._hop(self._opened, channel, data)
            if refused is not None:
                raise refused
        except BaseException:
            self._channels.remove(channel)  # never used for a fetch: closed, the next lease opens another
            channel.close()
            raise

    def _start(self, lease: Lease) -> None:
        """Write the getMessage request of ``lease`` on this thread (its answer is read by
        :meth:`_finish`, after the batch in hand was iterated: the broker works meanwhile)."""
        address = lease.address
        t0 = time.monotonic()
        channel: BlockingChannel | None = None
        try:
            channel = self._channel(address)
            channel.serial = serial = (channel.serial + 1) & SERIAL_MASK
            t0 = time.monotonic()
            channel.write(self._frame(serial, FETCH_METHOD, lease.body), self._rpc_timeout, t0)
        except Exception as exc:  # noqa: BLE001 - judged like any failed fetch by _failed
            self._pending.append((lease, None, 0, t0, self._failed(address, channel, exc)))
            return
        self._pending.append((lease, channel, serial, t0, None))

    def _finish(self) -> Fetched:
        """The next answer to a request :meth:`_start` wrote (the first to arrive; a request that
        could not be written is answered at once, one with no answer within the rpc timeout of its
        write times out). Any failure is an answer too (the loop thread backs the partition off and
        counts it against the broker's health)."""
        pending = self._pending
        index = 0
        for i, p in enumerate(pending):
            if p[1] is None:
                index = i
                break
        else:
            if len(pending) > 1:
                left = pending[0][3] + self._rpc_timeout - time.monotonic()
                ready = _first_readable([p[1] for p in pending], left)  # type: ignore[misc]
                if ready is None:  # the oldest one got nothing within the rpc timeout
                    lease, channel, serial, t0, _ = pending.popleft()
                    assert channel is not None
                    err = TubeMQTimeoutError(f"{channel.address}: no answer to request serial {serial} "
                                             f"within {self._rpc_timeout:.1f} s")
                    return lease, None, None, self._failed(channel.address, channel, err), t0
                index = ready
        lease, channel, serial, t0, error = pending[index]
        del pending[index]
        if channel is None:
            return lease, None, None, error, t0
        try:
            data = channel.read(serial, self._rpc_timeout, time.monotonic())
        except Exception as exc:  # noqa: BLE001 - judged like any failed fetch by _failed
            return lease, None, None, self._failed(channel.address, channel, exc), t0
        self._idle.setdefault(channel.address, []).append(channel)
        return lease, channel, data, None, t0

    def _failed(self, address: str, channel: BlockingChannel | None, exc: Exception) -> BaseException:
        """``exc`` of a write or read as the fetch's error; a channel it broke is closed, and with it
        the idle ones to the same broker (they are likely as dead: open new ones next time)."""
        if isinstance(exc, (Unsent, ConnectionLostError, TubeMQTimeoutError, OSError)):
            self._drop(address, channel)
            return exc if isinstance(exc, TubeMQError) else ConnectionLostError(f"{address}: {exc}")
        if isinstance(exc, TubeMQError):  # no connection (connect refused or timed out), or closed meanwhile
            if channel is not None and channel.closed:
                self._drop(address, channel)
            return exc
        raise exc

    def _drop(self, address: str, channel: BlockingChannel | None) -> None:
        for c in [*self._idle.pop(address, []), *([] if channel is None else [channel])]:
            if c in self._channels:
                self._channels.remove(c)
            c.close()

    def start(self) -> bool:
        """Take over the fetching of the consumer; False if this route is not available now (TLS, or
        another iterator of this consumer fetches on its own thread already)."""
        if self._aio.config.tls:
            return False
        self._started = bool(self._hop(self._begin))
        return self._started

    def next_batch(self, done: Batch | None, timeout: float | None) -> Batch | None:
        """Confirm ``done`` (if any) and return the next batch; None after ``timeout`` seconds (None:
        wait forever) without one, or once the consumer closed. The requests of new leases are
        written before a batch is returned, so the broker answers while the caller iterates."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            fetched = self._finish() if self._pending else None
            batch = self._took(self._hop(self._step, done, fetched, self._limit - len(self._pending)))
            done = None
            if batch is not None:
                return batch
            if self._pending:
                continue
            left = None if deadline is None else deadline - time.monotonic()
            if self._engine.closing or (left is not None and left <= 0):
                return None
            batch = self._took(self._wait_on_loop(1.0 if left is None else min(1.0, left)))
            if batch is not None:
                return batch

    def _took(self, out: Step) -> Batch | None:
        """What a step on the loop gave: write the new leases' requests at once, raise its error."""
        batch, leases, error = out
        for lease in leases:
            self._start(lease)
        if error is not None:
            raise error
        return batch

    def stop(self) -> None:
        """The iteration is over (its thread): the answers to requests written ahead are read (bounded
        by the rpc timeout; at once after close) and put back for the next poll, then the sockets
        are closed."""
        try:
            fetched: list[Fetched] = []
            while self._pending:
                fetched.append(self._finish())
            if self._started:
                self._hop(self._end, fetched)
        except TubeMQError:
            pass  # the loop is gone: the consumer is closed and rolled everything back
        finally:
            self._pending.clear()
            for channel in self._channels:
                channel.close()
            self._channels.clear()
            self._idle.clear()

    def abort(self) -> None:
        """Any thread (the consumer's close, on the loop): a read blocked on this feed's sockets returns
        at once."""
        self._aborted = True
        for channel in list(self._channels):
            channel.abort()


__all__ = ["DirectFeed"]
