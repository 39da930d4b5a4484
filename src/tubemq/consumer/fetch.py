"""getMessage result handling and the bounded delivery buffer (the fetch workers that drive them on the
event loop are in :mod:`.workers`).

Each partition has at most one fetch or one unconfirmed batch at a time (the broker keeps a single
in-flight delta per partition, §5.3), and the buffer of fetched-but-not-yet-taken batches is bounded:
a worker reserves buffer space *before* it fetches, so a slow application never makes the consumer
hold more than ``prefetch`` batches in memory.

Result handling follows docs/PROTOCOL.md §5.2.7 (waits per error code) and §5.2.8 (flow control).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from .. import codec
from .._tasks import wake_all
from ..codec import Partition
from ..errors import ClientClosedError, DecodeError, RemoteError, TubeMQError
from ..metrics import Histogram
from ..protocol import broker_pb
from ..protocol.constants import ErrorCode
from ..types import Batch
from .flowctrl import FlowControl
from .partitions import PartitionSlot, PartitionTable

log = logging.getLogger("tubemq.consumer.fetch")

#: ``Batch`` lives in :mod:`tubemq.types`; still importable from here for older imports
__all__ = ["OTHER_ERROR_WAIT", "Batch", "DeliveryBuffer", "Fetcher", "get_message_request"]

#: wait (seconds) before the next fetch of a partition after these answers (§5.2.7)
_ERROR_WAITS: dict[int, float] = {
    ErrorCode.FORBIDDEN: 2.0,
    ErrorCode.SERVICE_UNAVAILABLE: 0.3,
    ErrorCode.MOVED: 0.2,
}
OTHER_ERROR_WAIT = 0.3
#: serialized getMessage requests kept (two per partition); the cache is emptied when it is full
_MAX_CACHED_REQUESTS = 4096
#: the broker no longer holds the partition for us: drop it locally (the master learns from the report)
_LOST_CODES = frozenset({ErrorCode.HB_NO_NODE, ErrorCode.DUPLICATE_PARTITION, ErrorCode.CERTIFICATE_FAILURE})


def get_message_request(client_id: str, group: str, partition: Partition, last_consumed: bool,
                        esc_flow_ctrl: bool = False) -> bytes:
    """GetMessageRequestC2B exactly as the Java client fills it (s2 capture: every field present)."""
    return broker_pb.GetMessageRequestC2B(
        clientId=client_id,
        partitionId=partition.partition_id,
        groupName=group,
        topicName=partition.topic,
        lastPackConsumed=last_consumed,
        manualCommitOffset=False,
        escFlowCtrl=esc_flow_ctrl,
    ).SerializeToString()


class DeliveryBuffer:
    """Bounded FIFO of fetched batches waiting for the application.

    ``reserve()`` takes one unit of space before a fetch; a fetch that yields no batch gives it back with
    ``unreserve()``; taking a batch frees its unit.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = max(1, capacity)
        self._credits = self.capacity
        self._items: deque[Batch] = deque()
        self._space = asyncio.Event()
        self._space.set()
        #: futures of ``take`` calls waiting for a batch: woken by ``push``, no Task per wait
        self._waiters: list[asyncio.Future[None]] = []
        self._closed = False

    def __len__(self) -> int:
        return len(self._items)

    async def reserve(self) -> None:
        while self._credits <= 0:
            if self._closed:
                raise ClientClosedError("consumer closed")
            self._space.clear()
            await self._space.wait()
        if self._closed:
            raise ClientClosedError("consumer closed")
        self._credits -= 1

    def unreserve(self) -> None:
        self._credits += 1
        self._space.set()

    def push(self, batch: Batch) -> None:
        self._items.append(batch)
        self._wake()

    def put_back(self, batch: Batch) -> None:
        """A batch taken but never shown to the application goes back to the head of the queue (it
        takes its unit of space again, so the buffer may briefly exceed ``capacity`` by it)."""
        self._credits -= 1
        self._items.appendleft(batch)
        self._wake()

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        wake_all(waiters)

    def take_nowait(self, is_current: Callable[[Batch], bool]) -> Batch | None:
        while self._items:
            batch = self._items.popleft()
            self.unreserve()
            if is_current(batch):
                return batch
        return None

    async def take(self, timeout: float | None, is_current: Callable[[Batch], bool]) -> Batch | None:
        """The next current batch, or None after ``timeout`` seconds (None = wait forever) or close."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            batch = self.take_nowait(is_current)
            if batch is not None or self._closed:
                return batch
            if deadline is not None and deadline <= loop.time():
                return None
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.append(waiter)
            timer = None if deadline is None else loop.call_at(deadline, _expire, waiter)
            try:
                await waiter
            finally:
                if timer is not None:
                    timer.cancel()
                if self._waiters:  # timed out or cancelled: not woken, so still listed
                    with contextlib.suppress(ValueError):
                        self._waiters.remove(waiter)

    def drain(self) -> list[Batch]:
        items = list(self._items)
        self._items.clear()
        return items

    def close(self) -> None:
        self._closed = True
        self._space.set()
        self._wake()


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class Fetcher:
    """The getMessage half of the engine: a lease's request body, the judgement of its answer (waits
    per error code, flow control, filters, lost partitions) and the fetch counters. No I/O: the drivers
    (:mod:`.workers`, the blocking iterator) move the bytes."""

    def __init__(
        self,
        table: PartitionTable,
        *,
        client_id: str,
        group: str,
        flow: FlowControl,
        rpc_timeout_ms: int = 10000,
        verify_checksum: bool = True,
        client_filter: bool = True,
        on_lost: Callable[[PartitionSlot], None] | None = None,
        metrics: Any = None,
        on_result: Callable[[str, BaseException | None], None] | None = None,
    ) -> None:
        self.table = table
        self.client_id = client_id
        self.group = group
        self.flow = flow
        self.rpc_timeout_ms = rpc_timeout_ms
        self.verify = verify_checksum
        self.client_filter = client_filter
        self.on_lost = on_lost
        self.metrics = metrics
        #: ``on_result(broker address, None | exception)`` after every getMessage (broker health)
        self.on_result = on_result
        self.last_error: TubeMQError | None = None
        # per-fetch figures: plain ints on the loop thread, read by metrics snapshots
        self.fetches = 0  # getMessage requests sent
        self.messages = 0  # messages handed to the delivery buffer
        self.bytes_received = 0  # size of the getMessage answers
        self.empty_fetches = 0  # answers "no message" (404)
        self.in_flight = 0  # getMessage requests awaiting an answer
        self.errors_by_broker: dict[str, int] = {}  # failed getMessage calls per broker address
        self._latency: Histogram | None = None
        if metrics is not None:
            self._latency = metrics.histogram("consumer.fetch_latency")
            metrics.register_counter("consumer.fetches", lambda: self.fetches)
            metrics.register_counter("consumer.messages", lambda: self.messages)
            metrics.register_counter("consumer.bytes_received", lambda: self.bytes_received)
            metrics.register_counter("consumer.empty_fetches", lambda: self.empty_fetches)
            metrics.set_gauge("consumer.in_flight", lambda: self.in_flight)
            for name in ("fetch_errors", "decode_errors", "dropped_messages"):
                metrics.inc(f"consumer.{name}", 0)  # present from the start (counted on failure paths)
        self._requests: dict[tuple[Partition, bool], bytes] = {}

    def count(self, name: str, n: int = 1) -> None:
        if self.metrics is not None:
            self.metrics.inc(name, n)

    def begin(self, slot: PartitionSlot) -> bytes:
        """Count one getMessage for the FETCHING ``slot`` and return its request body; every call is
        followed by one :meth:`answer` or :meth:`end` (through :class:`~tubemq.consumer.engine.ConsumerEngine`)."""
        p = slot.partition
        # the request of a partition takes two shapes (lastPackConsumed true / false): built once each
        cache_key = (p, slot.last_consumed)
        body = self._requests.get(cache_key)
        if body is None:
            if len(self._requests) >= _MAX_CACHED_REQUESTS:
                self._requests.clear()
            body = self._requests[cache_key] = get_message_request(self.client_id, self.group, p,
                                                                    slot.last_consumed)
        self.fetches += 1
        self.in_flight += 1
        return body

    def end(self, slot: PartitionSlot, booking: int) -> None:
        """The getMessage :meth:`begin` counted is given up unanswered (the consumer closes): rolled back."""
        self.in_flight -= 1
        self.table.fetch_done(slot, booking, consumed=False)

    def answer(self, slot: PartitionSlot, booking: int, data: bytes | None, exc: BaseException | None,
               t0: float) -> Batch | None:
        """Judge the answer to the getMessage :meth:`begin` counted (``data``: RspResponseBody.data, or
        ``exc``: the call failed, outcome unknown; ``t0``: when the request was written). Loop thread."""
        self.in_flight -= 1
        p = slot.partition
        if data is None:
            # outcome unknown: never claim the previous batch consumed again (Java: lastPackConsumed=false)
            level = logging.INFO if isinstance(exc, RemoteError) else logging.DEBUG
            log.log(level, "partition %s: getMessage failed: %s", p.key, exc)
            self.count("consumer.fetch_errors")
            self.errors_by_broker[p.address] = self.errors_by_broker.get(p.address, 0) + 1
            slot.last_code, slot.last_message = ErrorCode.UNSPECIFIED_ABNORMAL, str(exc)
            self.table.fetch_done(slot, booking, consumed=False, delay=OTHER_ERROR_WAIT)
            if self.on_result is not None:
                self.on_result(p.address, exc if exc is not None else TubeMQError("getMessage failed"))
            return None
        if self.on_result is not None:
            self.on_result(p.address, None)
        if self._latency is not None:
            self._latency.record(time.monotonic() - t0)
        self.bytes_received += len(data)
        try:
            res = codec.decode_get_message_response(data, p.topic, p, self.verify)
        except DecodeError as exc:
            err = DecodeError(f"getMessage answer for partition {p} at offset {slot.curr_offset} "
                              f"cannot be decoded: {exc}")
            log.error("%s", err)
            self.last_error = err
            self.count("consumer.decode_errors")
            self.table.fetch_done(slot, booking, consumed=False, delay=OTHER_ERROR_WAIT)
            return None
        code = res.err_code
        slot.last_code, slot.last_message = code, res.err_msg
        if code == ErrorCode.SUCCESS:
            batch = self._on_success(slot, booking, res)
            if batch is not None:
                batch.requested_at = t0
            return batch
        if code == ErrorCode.NOT_FOUND:
            self.empty_fetches += 1
            slot.empty_fetches += 1
            delay = self.flow.empty_delay(slot.empty_fetches)
            self.table.fetch_done(slot, booking, consumed=False, delay=delay)
            return None
        if code in _LOST_CODES:
            log.warning("partition %s: broker answered [%d] %s; dropping it", p.key, code, res.err_msg)
            self.table.drop(slot, f"getMessage [{code}] {res.err_msg}")
            if self.on_lost is not None:
                self.on_lost(slot)
            return None
        if code == ErrorCode.SERVER_CONSUME_SPEED_LIMIT:
            delay = (res.min_limit_time if res.min_limit_time > 0 else self.flow.msg_not_found_wait_ms) / 1000.0
        else:
            delay = _ERROR_WAITS.get(code, OTHER_ERROR_WAIT)
            log.info("partition %s: getMessage [%d] %s; retrying in %.1f s", p.key, code, res.err_msg, delay)
        self.table.fetch_done(slot, booking, consumed=False, delay=delay)
        return None

    def _on_success(self, slot: PartitionSlot, booking: int, res: Any) -> Batch | None:
        p = slot.partition
        slot.empty_fetches = 0
        pending = slot.unresolved
        if pending is not None:
            slot.unresolved = None
            # the broker committed the locally confirmed batch, then read from the committed offset
            # (BrokerServiceServer.getMessages: currOffset is the read's start); still its start offset
            # means the commit was lost with an unanswered fetch (lastPackConsumed false): stays -1
            if res.curr_offset > pending.start_offset:
                pending.next_offset = res.curr_offset
        if res.curr_offset >= 0:
            slot.curr_offset = res.curr_offset
        if res.max_offset >= 0:
            slot.max_offset = res.max_offset
        if res.dropped:
            log.warning("partition %s: %d message(s) at offset %d failed checksum/header checks and were skipped",
                        p.key, res.dropped, res.curr_offset)
            self.count("consumer.dropped_messages", res.dropped)
        messages = res.messages
        if slot.filters and self.client_filter and messages:
            # Java semantics (§4.8): with filters, a message without a matching $msgType$ is dropped
            messages = [m for m in messages if m.stream_id in slot.filters]
        nbytes = sum(len(m.data) for m in messages) if self.flow.has_data_limits else 0
        delay = self.flow.data_delay(filtered=bool(slot.filters), require_slow=res.require_slow,
                                     data_dlt=res.curr_data_dlt, nbytes=nbytes)
        if not messages:
            # the broker already committed an empty read (§5.3): release as consumed
            self.table.fetch_done(slot, booking, consumed=True, delay=delay)
            return None
        batch = Batch(p, messages, res.curr_offset, res.max_offset, slot=slot, booking=booking,
                      release_delay=delay)
        if not self.table.fetch_done(slot, booking, batch=batch):
            return None  # revoked while fetching: abandoned and rolled back
        self.messages += len(messages)
        return batch
