"""What makes a send's acknowledgement honest: its data reached the store at the configured flush level.

With ``flush="interval"``/``"never"`` the answers of one read are written after the RPC batch-end hook
wrote the read's appends to the OS (``flush``), and the acknowledgements of sends whose write failed are
replaced by the error; with ``"always"`` a send waits for the group fsync that covers it (``wait_sync``).
A write or fsync that fails (a full disk) turns the answer into the real broker's 419 with the cause.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from ..._tasks import wait_for
from ...protocol import broker_pb
from ...protocol.constants import ErrorCode as E
from ..rpc import RpcContext
from ..storage import MessageStore, WriteBatch
from ..storage.manager import StoreManager

log = logging.getLogger("tubemq.server.broker")


def write_failed(ctx: RpcContext, exc: OSError) -> Any:
    """The real broker answers 419 when its store refuses a message (MsgFileStore.appendMsg failing
    on an IOException); the cause is added so a full disk is named, not guessed."""
    return broker_pb.SendMessageResponseB2P(
        success=False,
        errCode=E.SERVER_RECEIVE_OVERFLOW,
        errMsg=f"Put message failed from {ctx.remote_host}, server receive message overflow! (store write failed: {exc})",
    )


class SendDurability:
    """This read's acknowledged sends, the sends waiting for an fsync, and the fsync loop."""

    def __init__(self, stores: StoreManager, policy: str, interval_ms: int) -> None:
        self.stores = stores
        self.policy = policy  # "always" / "interval" / "never"
        self.interval_s = interval_ms / 1000.0
        #: the acknowledged sends of the current read, checked at its end (flush)
        self._acks: list[tuple[WriteBatch, RpcContext]] = []
        #: flush="always": sends waiting for the fsync that covers them (store, offset, batch, future)
        self._waiters: list[tuple[MessageStore, int, WriteBatch, asyncio.Future[OSError | None]]] = []
        self._wakeup: asyncio.Event | None = None
        self._running = False

    def acknowledged(self, batch: WriteBatch, ctx: RpcContext) -> None:
        """A send answered now; replaced by the error if its batch's write fails at the read's end."""
        self._acks.append((batch, ctx))

    def wait_sync(self, store: MessageStore, offset: int, batch: WriteBatch) -> asyncio.Future[OSError | None]:
        """flush="always": the future set once the data at ``offset`` is fsynced (None) or cannot be."""
        fut: asyncio.Future[OSError | None] = asyncio.get_running_loop().create_future()
        self._waiters.append((store, offset, batch, fut))
        self.request_sync()
        return fut

    def flush(self) -> dict[int, tuple[RpcContext, Any]]:
        """Batch end: the read's appends to the OS; the answers to replace (by serial) of sends whose
        write failed."""
        acks = self._acks  # this read's acknowledgements (taken first: never carried to the next read)
        self._acks = []
        failed = self.stores.flush_pending()
        if failed and self._waiters:
            self._release_waiters()
        return {
            ctx.serial: (ctx, write_failed(ctx, batch.error or OSError("the message was not written")))
            for batch, ctx in acks if not batch.written
        }

    def start(self) -> None:
        self._running = True
        self._wakeup = asyncio.Event()

    def stop(self) -> None:
        """After the loop was cancelled: sends still waiting for an fsync fail."""
        self._running = False
        for _, _, _, fut in self._waiters:
            if not fut.done():
                fut.set_exception(ConnectionError("broker stopped"))
        self._waiters = []

    async def run(self) -> None:
        """fsync by policy: group commit for "always", a timer for "interval", nothing for "never".

        Each pass is woken by a send (always) or the timer; it never re-arms itself, so waiters whose
        data cannot be made durable are failed rather than spun on."""
        assert self._wakeup is not None
        loop = asyncio.get_running_loop()
        while self._running:
            if self.policy == "always":
                await self._wakeup.wait()
            else:
                with contextlib.suppress(asyncio.TimeoutError):
                    await wait_for(self._wakeup.wait(), self.interval_s)
            self._wakeup.clear()
            if self.policy == "never":
                continue
            try:
                plan = self.stores.sync_plan()
                if plan:
                    self.stores.apply_synced(await loop.run_in_executor(None, StoreManager.run_sync, plan))
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("broker fsync pass failed")
            self._release_waiters()

    def _release_waiters(self) -> None:
        """Answer the waiters whose fsync is done or whose data cannot be made durable."""
        keep = []
        for store, offset, batch, fut in self._waiters:
            if fut.done():
                continue
            if store.closed:
                fut.set_exception(ConnectionError("store closed"))
            elif batch.error is not None:
                fut.set_result(batch.error)
            elif batch.written and store.synced_offset > offset:
                fut.set_result(None)
            elif batch.written and store.sync_error is not None and offset < store.sync_error[0]:
                fut.set_result(store.sync_error[1])
            else:
                keep.append((store, offset, batch, fut))  # written after this pass planned: next pass
        self._waiters = keep

    def request_sync(self) -> None:
        if self._wakeup is not None:
            self._wakeup.set()
