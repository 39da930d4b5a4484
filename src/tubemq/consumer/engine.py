"""The consumer engine: what a fetch route decides, written once for every driver.

Why: two fetch sequences side by side (the loop's fetch workers, the blocking iterator's own round trips
on its thread) drift apart, and a step one of them forgets (presenting the consumer's tokens on a new
connection) makes that route read nothing from an authenticated broker, silently. Here the lease / fetch /
answer / confirm cycle, what a new link to a broker must send first, the flow control and filters of an
answer (:class:`~tubemq.consumer.fetch.Fetcher` judges it), pause/resume at delivery, deserialization
and the counters are decided in one place; a driver only moves the bytes the engine gives it and hands
back what came.

No sockets, threads or event loop in here: every method is plain code, called on the thread that owns
the consumer's state (the event loop's). The protocol a driver follows::

    lease = engine.lease()                  # a ready partition, its getMessage request built
    link = <a connection to lease.address>
    if engine.needs_opening(link):          # a link fetches only once it presented the tokens
        answer = round trip (OPENING_METHOD, engine.opening(lease.address))
        error = engine.opened(link, answer, exc)   # None: the link may fetch now
    answer = round trip (FETCH_METHOD, lease.body)
    batch = engine.answer(lease, link, answer, exc, t0)

:meth:`answer` refuses an answer read on a link that was never opened (a driver that skipped the opening
fails at once, in every mode, instead of being refused by an authenticating broker only).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import TubeMQError
from ..serializers import deserialize_messages
from ..types import Batch
from .links import FETCH_METHOD, OPENING_METHOD, Links
from .partitions import PartitionSlot

if TYPE_CHECKING:
    from ..config import ConsumerConfig
    from .brokers import BrokerClient
    from .fetch import DeliveryBuffer, Fetcher
    from .partitions import PartitionTable

__all__ = ["FETCH_METHOD", "OPENING_METHOD", "ConsumerEngine", "Lease", "Links"]

class Lease:
    """One getMessage of a partition taken for fetching (FETCHING), answered once by :meth:`ConsumerEngine.answer`."""

    __slots__ = ("body", "booking", "slot")

    def __init__(self, slot: PartitionSlot, booking: int, body: bytes) -> None:
        self.slot = slot
        self.booking = booking
        #: the serialized GetMessageRequestC2B
        self.body = body

    @property
    def address(self) -> str:
        return self.slot.partition.address

    @property
    def key(self) -> str:
        return self.slot.key


class ConsumerEngine:
    """Leases, answers, delivery and confirms of one server-balanced consumer; see the module docstring."""

    def __init__(self, config: ConsumerConfig, client_id: str, table: PartitionTable, buffer: DeliveryBuffer,
                 fetcher: Fetcher, links: Links, brokers: BrokerClient) -> None:
        self.config = config
        self.client_id = client_id
        self.table = table
        self.buffer = buffer
        self.fetcher = fetcher
        #: the value_deserializer applied to a batch as it is delivered
        self.deserialize: Callable[..., Any] | None = config.deserialize
        #: set as the consumer's close begins: nothing more is delivered, answers are rolled back
        self.closing = False
        self.batches = 0  # batches handed to the application
        self.confirms = 0
        self.links = links
        self.brokers = brokers

    # ---- links (see :class:`Links`)
    def needs_opening(self, link: Any) -> bool:
        return self.links.needs_opening(link)

    def opening(self, address: str) -> bytes:
        """The request body a new link to ``address`` writes first (method :data:`OPENING_METHOD`): a
        heartbeat of the partitions held there, with the visit token and (auth configured) the signed
        token, so that the broker serves this link's reads as it does the registering one's."""
        partitions = [s.partition for s in self.table.registered() if s.partition.address == address]
        return self.brokers.heartbeat_request(partitions)

    def opened(self, link: Any, data: bytes | None, exc: BaseException | None) -> TubeMQError | None:
        return self.links.opened(link, data, exc)

    # ---- fetching
    def lease(self) -> Lease | None:
        """A partition ready to fetch, taken (FETCHING) with its request built; None if none is."""
        slot = self.table.acquire_nowait()
        return None if slot is None else self.lease_slot(slot)

    def lease_slot(self, slot: PartitionSlot) -> Lease:
        """The lease of ``slot``, already taken from the table (a fetch worker waited for it)."""
        return Lease(slot, slot.booking, self.fetcher.begin(slot))

    def answer(self, lease: Lease, link: Any, data: bytes | None, exc: BaseException | None,
               t0: float) -> Batch | None:
        """Judge the answer to ``lease`` read on ``link`` (None when the request could not be written):
        the batch (the slot IN_FLIGHT), or None (backed off, released or dropped as the answer asks)."""
        if data is not None and link is not None and self.links.needs_opening(link):
            raise RuntimeError(f"getMessage answer read on a link to {lease.address} that never presented "
                               f"the consumer's tokens: the driver skipped ConsumerEngine.opening")
        if self.closing:  # rolled back; a read cut short by close is no broker failure
            self.abandon(lease)
            return None
        return self.fetcher.answer(lease.slot, lease.booking, data, exc, t0)

    def abandon(self, lease: Lease) -> None:
        """``lease`` is given up without an answer (the consumer closes): rolled back."""
        self.fetcher.end(lease.slot, lease.booking)

    # ---- delivery
    def is_current(self, batch: Batch) -> bool:
        slot = batch._slot
        return slot is not None and self.table.is_current(slot, batch._booking)

    def deliverable(self, batch: Batch) -> bool:
        """Current, and not of a partition paused since it was fetched: such a batch is rolled back
        (fetched again from the same offset after resume), as Kafka's poll returns nothing of a paused
        partition."""
        if not self.is_current(batch):
            return False
        if batch.partition.key in self.table.paused_keys_view:
            self.confirm_local(batch, False)
            return False
        return True

    def take_buffered(self) -> Batch | None:
        """The next deliverable batch a fetch worker buffered, if any (not yet delivered)."""
        return self.buffer.take_nowait(self.deliverable)

    def deliver(self, batch: Batch) -> None:
        """``batch`` is handed to the application: from now on the confirm timeout applies to it.
        Raises the value_deserializer's error (the batch rolled back)."""
        batch.delivered = True
        self.batches += 1
        if self.deserialize is not None:
            try:
                deserialize_messages(batch.messages, self.deserialize)
            except Exception:
                self.confirm_local(batch, False)
                raise

    def confirm_local(self, batch: Batch, consumed: bool = True) -> bool:
        """Finish ``batch`` locally (the commit rides on the partition's next fetch)."""
        slot = batch._slot
        if slot is None or batch.confirmed:
            return False
        ok = self.table.confirm(slot, batch._booking, consumed, batch.release_delay)
        batch.confirmed = ok
        if ok:
            self.confirms += 1
            if batch.next_offset < 0:
                if consumed:
                    slot.unresolved = batch  # the next answer of the partition tells (Fetcher.answer)
                else:
                    batch.next_offset = batch.start_offset  # a rollback leaves the group where the read began
        return ok

    def unpoll(self, batch: Batch) -> None:
        """``batch`` was delivered but the application never saw it (an iterator that stopped with it
        queued ahead): back to the head of the buffer, not delivered, as if never polled."""
        if batch.confirmed or self.closing:
            return  # close rolls it back
        if not self.is_current(batch):
            self.confirm_local(batch, False)  # a revoke waits for it: roll it back now
            return
        batch.delivered = batch.held = False
        self.batches -= 1
        self.buffer.put_back(batch)

    def put_back(self, batch: Batch) -> None:
        """A batch fetched but never delivered goes back to the head of the buffer."""
        self.buffer.put_back(batch)

    def step(self, done: Batch | None, lease: Lease | None, link: Any, data: bytes | None,
             exc: BaseException | None, t0: float, room: int) -> tuple[Batch | None, list[Lease], BaseException | None]:
        """One turn of a driver that fetches on its own: confirm ``done``, judge the answer to ``lease``
        (if any), then the next batch to deliver (that answer's, else one buffered before), up to
        ``room`` new leases to write, and an error to raise to the caller (a value_deserializer's)."""
        if done is not None and not self.closing:
            self.confirm_local(done, True)
        batch = self.answer(lease, link, data, exc, t0) if lease is not None else None
        if batch is not None and not self.deliverable(batch):
            batch = None  # its partition was paused after the request was written: rolled back
        if self.closing:
            return None, [], None
        if batch is None:
            batch = self.take_buffered()
        leases: list[Lease] = []
        while len(leases) < room:
            taken = self.lease()
            if taken is None:
                break
            leases.append(taken)
        error: BaseException | None = None
        if batch is not None:
            try:
                self.deliver(batch)
            except Exception as err:  # rolled back, raised to the caller
                batch, error = None, err
        return batch, leases, error
