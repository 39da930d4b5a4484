"""The broker's stores of all topics under ``<data_dir>/store`` and the fsync plans of the flush policies."""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path

from . import MessageStore
from .disk import DiskWriter

log = logging.getLogger("tubemq.server.storage")

SyncPlan = list[tuple[MessageStore, list[int], int]]


class StoreManager:
    """The stores of all topics under ``<data_dir>/store``; fsync helpers for the flush policies."""

    def __init__(
        self, data_dir: Path | str, segment_bytes: int = 64 * 1024 * 1024, writer: DiskWriter | None = None
    ) -> None:
        self.root = Path(data_dir) / "store"
        self.root.mkdir(parents=True, exist_ok=True)
        self.segment_bytes = segment_bytes
        self.writer = writer
        self.stores: dict[tuple[str, int], MessageStore] = {}
        self._dirty: set[MessageStore] = set()  # appended since the last flush_pending
        self._dirty_sync: set[MessageStore] = set()  # written to the OS since the last fsync plan

    def set_writer(self, writer: DiskWriter) -> None:
        """Route every store's disk writes through ``writer`` (tests: an injected full disk)."""
        self.writer = writer
        for store in self.stores.values():
            store.writer = writer

    def get(self, topic: str, store_index: int, create: bool = True) -> MessageStore | None:
        key = (topic, store_index)
        store = self.stores.get(key)
        if store is None:
            path = self.root / topic / str(store_index)
            if not create and not path.exists():
                return None
            store = MessageStore(path, topic, store_index, self.segment_bytes, self.writer)
            self.stores[key] = store
        return store

    def mark_dirty(self, store: MessageStore) -> None:
        self._dirty.add(store)

    def flush_caches(self, topic: str | None = None) -> None:
        """Flush the memory caches of every store (of ``topic``): what the real broker's flush timer
        does after memCacheFlushIntvl (tests use it to reproduce a real broker's state)."""
        for (name, _), store in self.stores.items():
            if topic is None or name == topic:
                store.flush_cache()

    def flush_pending(self) -> list[MessageStore]:
        """Write every buffered append to the OS (called before acknowledgements go out); returns the
        stores whose write failed (their pending batch was rolled back and carries the error)."""
        if not self._dirty:
            return []
        failed = []
        for store in self._dirty:
            if not store.closed:
                try:
                    store.flush_pending()
                except OSError:
                    failed.append(store)
        self._dirty_sync |= self._dirty
        self._dirty = set()
        return failed

    def sync_plan(self) -> SyncPlan:
        """Flush pending appends and return what an fsync pass must cover (loop thread)."""
        self.flush_pending()
        dirty = self._dirty_sync
        self._dirty_sync = set()
        return [(s, *s.sync_targets()) for s in dirty if not s.closed]

    @staticmethod
    def run_sync(plan: SyncPlan) -> tuple[SyncPlan, list[tuple[MessageStore, int, OSError]]]:
        """fsync the planned fds (worker thread); returns the entries that succeeded and the failures."""
        done = []
        failed = []
        for store, fds, offset in plan:
            try:
                for fd in fds:
                    store.writer.fsync(fd)
            except OSError as exc:
                failed.append((store, offset, exc))
                continue
            done.append((store, fds, offset))
        return done, failed

    def apply_synced(self, result: tuple[SyncPlan, list[tuple[MessageStore, int, OSError]]]) -> None:
        """Loop thread, after run_sync: advance durable offsets; failed stores are retried next pass."""
        done, failed = result
        for store, fds, offset in done:
            if not store.closed:
                store.synced(offset, fds)
        for store, offset, exc in failed:
            if store.closed:
                continue
            if store.sync_error is None:
                log.error("fsync of %s/%d failed: %s", store.topic, store.store_index, exc)
            store.sync_error = (offset, exc)
            self._dirty_sync.add(store)

    def sync_now(self) -> None:
        """Synchronous flush + fsync of everything (shutdown, tests)."""
        self.apply_synced(self.run_sync(self.sync_plan()))

    def drop_topic(self, topic: str) -> None:
        """Close and delete every store of ``topic`` (topic deleted)."""
        for key in [k for k in self.stores if k[0] == topic]:
            store = self.stores.pop(key)
            self._dirty.discard(store)
            store.close()
        shutil.rmtree(self.root / topic, ignore_errors=True)

    def known_topics_on_disk(self) -> list[str]:
        return sorted(p.name for p in self.root.iterdir() if p.is_dir())

    def apply_retention(self, retention_ms: int | None, retention_bytes: int | None) -> int:
        if retention_ms is None and retention_bytes is None:
            return 0
        now = int(time.time() * 1000)
        return sum(s.apply_retention(now, retention_ms, retention_bytes) for s in list(self.stores.values()))

    def close(self) -> None:
        try:
            self.sync_now()
        except OSError:
            log.exception("final sync failed")
        for store in self.stores.values():
            store.close()
        self.stores.clear()
