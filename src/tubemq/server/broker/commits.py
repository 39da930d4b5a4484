"""Durable commit answers: an acknowledged commit survives a broker crash.

The commit handler notes each accepted commit here; at the end of the read that carried them (the RPC
batch-end hook) they are journaled, handed to the OS, before their answers are written, and with
``flush="always"`` answered only after the journal's fsync (group commit: one fsync in a worker thread
covers every commit queued before it started). A commit that could not be journaled is answered with
an exception, so the client does not report it committed.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from ..._tasks import cancel_and_wait
from ...protocol import constants as C
from ..rpc import RpcContext, RpcException
from .offsets import OffsetStore

log = logging.getLogger("tubemq.server.broker")

Entry = tuple[str, str, int, int]  # (group, topic, partition id, committed offset)


class CommitJournal:
    """This read's accepted commits, and the answers waiting for the journal's fsync."""

    def __init__(self, offsets: OffsetStore, sync_each: bool) -> None:
        self.offsets = offsets
        #: flush="always": commits are answered after the fsync that covers them
        self.sync_each = sync_each
        self._acks: list[tuple[Entry, RpcContext]] = []
        self._syncs: list[asyncio.Future[OSError | None]] = []
        self._pending_syncs: list[asyncio.Future[OSError | None]] = []
        self._sync_task: asyncio.Task[None] | None = None

    def accepted(self, entry: Entry, ctx: RpcContext) -> asyncio.Future[OSError | None] | None:
        """Note an accepted commit; with ``sync_each`` the future its answer waits for (None: the
        error, or None once the journal is on disk)."""
        self._acks.append((entry, ctx))
        if not self.sync_each:
            return None
        fut: asyncio.Future[OSError | None] = asyncio.get_running_loop().create_future()
        self._syncs.append(fut)
        return fut

    def flush(self) -> dict[int, tuple[RpcContext, Any]]:
        """Batch end: journal this read's commits; the answers to replace (by serial) if that failed."""
        commits, self._acks = self._acks, []
        if not commits:
            return {}
        error = self.offsets.journal([entry for entry, _ in commits])
        if self.sync_each:
            waiters, self._syncs = self._syncs, []
            if error is not None:
                for fut in waiters:
                    if not fut.done():
                        fut.set_result(error)
            else:
                self._queue_sync(waiters)
            return {}
        if error is None:
            return {}
        return {
            ctx.serial: (ctx, RpcException(C.EXC_JAVA_EXCEPTION, f"the commit of group {entry[0]!r} was not saved: "
                                                                  f"{error}"))
            for entry, ctx in commits
        }

    def _queue_sync(self, waiters: list[asyncio.Future[OSError | None]]) -> None:
        self._pending_syncs.extend(waiters)
        if self._sync_task is None or self._sync_task.done():
            self._sync_task = asyncio.ensure_future(self._run_syncs())

    async def _run_syncs(self) -> None:
        loop = asyncio.get_running_loop()
        while self._pending_syncs:
            waiters, self._pending_syncs = self._pending_syncs, []
            error: OSError | None = None
            try:
                await loop.run_in_executor(None, self.offsets.sync_journal)
            except OSError as exc:
                log.error("fsync of the commit journal failed: %s", exc)
                error = exc
            for fut in waiters:
                if not fut.done():
                    fut.set_result(error)

    async def stop(self) -> None:
        """Stop the fsync worker; commits still waiting are answered as not saved."""
        task, self._sync_task = self._sync_task, None
        if task is not None:
            await cancel_and_wait([task])
        for waiter in [*self._syncs, *self._pending_syncs]:
            if not waiter.done():
                waiter.set_result(OSError("broker stopped"))
        self._syncs, self._pending_syncs = [], []
