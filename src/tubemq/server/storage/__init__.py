"""Broker storage: per (topic, store index) append-only data + index segments (docs/PROTOCOL.md §4.9, §4.10).

Why this layout:

* Offsets are byte positions in the store's index (28 bytes per message) shared by all partitions of
  the store, exactly as a real broker reports them (``appendOffset`` 0, 28, 56 ...).
* A data record is the message in its on-wire form, already wrapped as field 4 of
  GetMessageResponseB2C (``0x22 <len> TransferedMessage``). A fetch answer is therefore a
  concatenation of file slices: no per-message re-encoding, and a run of messages of one partition
  is a single ``pread``.
* Appends go to an in-memory buffer; :meth:`MessageStore.flush_pending` hands it to the OS (the RPC
  layer calls it after each batch of requests and *before* the acknowledgements are written, so a
  ``kill -9`` never loses an acknowledged message). ``fsync`` runs by policy on a worker thread.
* Crash safety: data is written before its index entry; on open the index is cut to whole entries
  and the tail entries whose record is missing or fails its CRC are dropped, then the data file is cut
  after the last valid record (torn tail).
* A failed write (a full disk: ENOSPC) rolls the whole pending batch back: both files are cut back to
  their last whole record, the offsets are reused, and the batch's :class:`WriteBatch` carries the
  error, so the sends in it are answered 419 with the cause instead of being acknowledged. For
  ``WRITE_RETRY_S`` after a failure sends are refused at once; then the next batch tries the disk again.
  All disk writes and fsyncs go through one :class:`DiskWriter` (tests inject a full disk there).
* Retention deletes whole non-active segments by age and/or total size; the min offset moves up.
* The real broker keeps fresh messages in a memory cache (``MsgMemStore``) and moves them into its
  files when the cache is full or its flush timer fires (``cache_flush_interval_ms``, the real
  memCacheFlushIntvl); reads behave differently on each side (see ``server/broker/__init__.py``). We always
  write the data at once and keep the cache *logically*:
  ``cache_start`` is the first index offset that is "still in memory". Capacity follows the real
  defaults (``memCacheMsgSizeInMB`` 2 -> 1 MiB, ``memCacheMsgCntInK`` 10 -> 5120 messages, raised to
  the topic's minimum cache size; sizes in the real broker's record units, 52 + data length).

The record and index formats, the segment files and the ``DiskWriter`` are in ``storage/disk.py``.

Index entry (big-endian, 28 bytes): partitionId i32, data offset i64 (global), record size i32,
keyCode i32 (Java hashCode of msgType or -1), append time ms i64.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ...protocol import constants as C
from .disk import (
    ENTRY,
    INDEX_ENTRY,
    REAL_RECORD_HEADER,
    RECORD_KEY,
    DiskWriter,
    WriteBatch,
    _fsync_dir,
    _Segment,
    encode_record,
    load_segments,
    payload_length,
    record_valid,
)

log = logging.getLogger("tubemq.server.storage")

#: Index entries scanned by one read at most when the caller gives no bound.
MAX_SCAN_ENTRIES = 16384
#: Memory cache defaults of the real broker: memCacheMsgSizeInMB = 2 and memCacheMsgCntInK = 10, which
#: TopicMetadata turns into 2 * 1024 * 512 bytes and 10 * 512 messages; the size is raised to the
#: topic's minimum cache size (max message size + 10240, plus (that % 4 + 1) * 512 KiB).
MEM_CACHE_MSG_SIZE = 2 * 1024 * 512
MEM_CACHE_MSG_COUNT = 10 * 512
_MESSAGE_SIZE_ADJUST = 512 * 1024
_MIN_MAX_MSG_SIZE = 1024 * 1024  # ClusterConfigHolder.calcMaxMsgSize clamps below at 1 MiB


#: After a failed write, sends to the store are refused without touching the disk for this long.
WRITE_RETRY_S = 0.2

#: The writer of stores created without one (a test process may replace it before the server starts).
default_writer = DiskWriter()


def mem_cache_bytes(max_msg_size: int) -> int:
    """Memory cache capacity (real record units) of a topic whose messages may be ``max_msg_size`` long."""
    tmp = max(max_msg_size, _MIN_MAX_MSG_SIZE) + C.META_MAX_MESSAGE_HEADER_SIZE
    return max(MEM_CACHE_MSG_SIZE, tmp + (tmp % 4 + 1) * _MESSAGE_SIZE_ADJUST)


@dataclass
class ReadResult:
    """What one read found: wrapped records (already in response form) and where it stopped."""

    chunks: list[bytes]
    count: int
    next_offset: int  # index offset after the last scanned entry
    data_dlt: int  # data bytes behind the end of this read
    last_data_end: int = -1  # data offset after the last scanned entry (-1: nothing scanned)
    last_msg_end: int = -1  # data offset after the last returned record (-1: none returned)


class MessageStore:
    """All partitions of one (topic, store index): offsets, append, read, recovery, retention."""

    def __init__(
        self, directory: Path, topic: str, store_index: int, segment_bytes: int, writer: DiskWriter | None = None
    ) -> None:
        self.writer = default_writer if writer is None else writer
        #: the appends not yet handed to the OS share this batch (replaced by each flush)
        self.batch = WriteBatch()
        #: the last write failure while it lasts (None once a write succeeded again)
        self.write_error: OSError | None = None
        self._retry_at = 0.0
        self._tail_dirty = False  # a rollback could not cut the files back: do it before writing
        #: (index offset the failed fsync should have made durable, error) until an fsync succeeds
        self.sync_error: tuple[int, OSError] | None = None
        self.directory = directory
        self.topic = topic
        self.store_index = store_index
        self.segment_bytes = segment_bytes
        directory.mkdir(parents=True, exist_ok=True)
        self.segments: list[_Segment] = []
        self._pend_idx = bytearray()
        self._pend_dat = bytearray()
        self._wfd_idx = -1
        self._wfd_dat = -1
        #: write fds of rolled segments that still need an fsync before being closed
        self.retired_fds: list[int] = []
        self.closed = False
        self._open()
        self.written_offset = self.max_offset  # index bytes handed to the OS
        self.synced_offset = self.max_offset  # index bytes known to be on disk (recovered = on disk)
        self.last_append_ms = 0
        #: start of the logical memory cache: entries before it are "in the file" (module docstring)
        self.cache_start = self.max_offset
        self.cache_max_bytes = mem_cache_bytes(_MIN_MAX_MSG_SIZE)
        self.cache_max_count = MEM_CACHE_MSG_COUNT
        self._cache_bytes = 0  # real record units
        self._cache_count = 0
        #: last index offset per partition id / per filter key code inside the cache (the real
        #: MsgMemStore's queuesMap / keysMap: a cache read first checks there is anything to find)
        self._cache_last_pid: dict[int, int] = {}
        self._cache_last_key: dict[int, int] = {}
        self._last_cache_flush = time.monotonic()  # MessageStore.lastMemFlushTime

    # ---- open / recovery

    def _open(self) -> None:
        self.segments = load_segments(self.directory, f"{self.topic}/{self.store_index}")
        if not self.segments:
            self._new_segment(0, 0)
        active = self.segments[-1]
        self._wfd_idx = os.open(active.idx_path, os.O_WRONLY | os.O_APPEND)
        self._wfd_dat = os.open(active.dat_path, os.O_WRONLY | os.O_APPEND)

    def _new_segment(self, idx_base: int, dat_base: int) -> None:
        seg = _Segment(self.directory, idx_base, dat_base)
        seg.idx_path.touch()
        seg.dat_path.touch()
        self.segments.append(seg)
        _fsync_dir(self.directory)

    # ---- offsets

    @property
    def min_offset(self) -> int:
        return self.segments[0].idx_base

    @property
    def max_offset(self) -> int:
        return self.segments[-1].idx_end + len(self._pend_idx)

    @property
    def data_max(self) -> int:
        seg = self.segments[-1]
        return seg.dat_base + seg.dat_len + len(self._pend_dat)

    @property
    def size_bytes(self) -> int:
        return sum(s.dat_len + s.idx_len for s in self.segments) + len(self._pend_dat) + len(self._pend_idx)

    # ---- append

    def append(
        self, partition_id: int, record: bytes, key_code: int, time_ms: int, data_len: int | None = None
    ) -> int:
        """Buffer one record; returns its index offset. Visible to the OS after flush_pending().

        ``data_len`` is the payload length (parsed from ``record`` when not given)."""
        seg = self.segments[-1]
        if seg.dat_len + len(self._pend_dat) >= self.segment_bytes and seg.idx_len + len(self._pend_idx) > 0:
            self._roll()
            seg = self.segments[-1]
        offset = seg.idx_end + len(self._pend_idx)
        real = REAL_RECORD_HEADER + (payload_length(record) if data_len is None else data_len)
        if self._cache_count and (
            self._cache_bytes + real > self.cache_max_bytes or self._cache_count >= self.cache_max_count
        ):
            # MsgMemStore.appendMsg refuses a message that does not fit: the cache is flushed to the
            # files and the message goes into the fresh cache (capture s6c: file max 924 of 1148)
            self.flush_cache()
        self._cache_bytes += real
        self._cache_count += 1
        self._cache_last_pid[partition_id] = offset
        self._cache_last_key[key_code] = offset
        self._pend_idx += INDEX_ENTRY.pack(
            partition_id, seg.dat_base + seg.dat_len + len(self._pend_dat), len(record), key_code, time_ms
        )
        self._pend_dat += record
        self.last_append_ms = time_ms
        return offset

    def set_cache_limits(self, max_bytes: int, max_count: int = MEM_CACHE_MSG_COUNT) -> None:
        """Cache capacity for this store's topic (see mem_cache_bytes)."""
        self.cache_max_bytes = max_bytes
        self.cache_max_count = max_count

    def flush_cache(self) -> None:
        """Move the logical memory cache into the "file": file reads can see it from now on."""
        self.cache_start = self.max_offset
        self._cache_bytes = 0
        self._cache_count = 0
        self._cache_last_pid.clear()
        self._cache_last_key.clear()
        self._last_cache_flush = time.monotonic()

    def flush_cache_older_than(self, age_s: float) -> bool:
        """The real flush timer: a non-empty cache is flushed ``age_s`` after the previous flush."""
        if self._cache_count and time.monotonic() - self._last_cache_flush >= age_s:
            self.flush_cache()
            return True
        return False

    def cache_has(self, start: int, partition_id: int, keys: frozenset[int] | None) -> bool:
        """Whether the cache holds, at or after ``start``, a message of the partition (or, filtered,
        of one of the keys, whatever its partition: MsgMemStore.getMessages checks only keysMap)."""
        if keys is None:
            return self._cache_last_pid.get(partition_id, -1) >= start
        last = self._cache_last_key
        return any(last.get(k, -1) >= start for k in keys)

    def segment_end(self, offset: int) -> int:
        """Index offset where the segment holding ``offset`` ends (a file read never crosses it); the
        active segment ends at the max offset, appends not yet handed to the OS included."""
        for seg in self.segments[:-1]:
            if offset < seg.idx_end:
                return seg.idx_end
        return self.max_offset

    def refusal(self) -> OSError | None:
        """The write error to answer a send with while the store is backing off after a failure."""
        if self.write_error is not None and time.monotonic() < self._retry_at:
            return self.write_error
        return None

    def flush_pending(self) -> None:
        """Hand buffered appends to the OS: data first, then the index entries that point at it.

        On failure the pending batch is rolled back (files cut back, offsets reused, the batch marked
        with the error) and the OSError is raised."""
        if not self._pend_idx:
            return
        seg = self.segments[-1]
        try:
            if self._tail_dirty:
                self._cut_back(seg)
            self._write_all(self._wfd_dat, self._pend_dat)
            self._write_all(self._wfd_idx, self._pend_idx)
        except OSError as exc:
            self._rollback(seg, exc)
            raise
        seg.dat_len += len(self._pend_dat)
        seg.idx_len += len(self._pend_idx)
        self._pend_dat = bytearray()
        self._pend_idx = bytearray()
        self.written_offset = seg.idx_end
        self.batch.written = True
        self.batch = WriteBatch()
        if self.write_error is not None:
            log.warning("%s/%d: store writes succeed again", self.topic, self.store_index)
            self.write_error = None

    def _flush_for_read(self) -> None:
        """Reads see what reached the OS; a failed flush was rolled back and its sends refused."""
        with contextlib.suppress(OSError):
            self.flush_pending()

    def _write_all(self, fd: int, data: bytes | bytearray) -> None:
        view = memoryview(data)
        write = self.writer.write
        while view:
            n = write(fd, view)
            view = view[n:]

    def _cut_back(self, seg: _Segment) -> None:
        """Cut both active files back to their last whole record (O_APPEND writes go to the end)."""
        os.ftruncate(self._wfd_dat, seg.dat_len)
        os.ftruncate(self._wfd_idx, seg.idx_len)
        self._tail_dirty = False

    def _rollback(self, seg: _Segment, exc: OSError) -> None:
        """Drop the pending batch after a failed write and leave the files as before it."""
        if self.write_error is None:
            log.error("%s/%d: store write failed, refusing sends until it succeeds: %s", self.topic, self.store_index, exc)
        self.write_error = exc
        self._retry_at = time.monotonic() + WRITE_RETRY_S
        try:
            self._cut_back(seg)
        except OSError as cut_exc:  # retried before the next write; recovery cuts it after a crash
            self._tail_dirty = True
            log.error("%s/%d: cutting back a failed write failed: %s", self.topic, self.store_index, cut_exc)
        dat_start = seg.dat_base + seg.dat_len
        offset = seg.idx_end
        for _pid, doff, size, _key, _t in INDEX_ENTRY.iter_unpack(bytes(self._pend_idx)):
            if offset >= self.cache_start and self._cache_count:
                rel = doff - dat_start
                with contextlib.suppress(ValueError, IndexError):
                    self._cache_bytes -= REAL_RECORD_HEADER + payload_length(bytes(self._pend_dat[rel : rel + size]))
                self._cache_count -= 1
            offset += ENTRY
        self._pend_dat = bytearray()
        self._pend_idx = bytearray()
        end = seg.idx_end
        self.cache_start = min(self.cache_start, end)
        if self._cache_count <= 0:
            self._cache_count = self._cache_bytes = 0
        self._cache_bytes = max(0, self._cache_bytes)
        if any(o >= end for last in (self._cache_last_pid, self._cache_last_key) for o in last.values()):
            self._rebuild_cache_last(end)
        self.batch.error = exc
        self.batch = WriteBatch()

    def _rebuild_cache_last(self, end: int) -> None:
        """Recompute the cache's last offset per partition and key from the entries written before a
        failed batch: dropping a key whose last entry was rolled back would hide its earlier cached
        entries from cache reads (and a consumer group would book them as read)."""
        self._cache_last_pid.clear()
        self._cache_last_key.clear()
        for seg in self.segments:
            lo = max(self.cache_start, seg.idx_base)
            hi = min(end, seg.idx_end)
            if hi <= lo:
                continue
            rfd_idx, _ = seg.read_fds()
            raw = os.pread(rfd_idx, hi - lo, lo - seg.idx_base)
            offset = lo
            for pid, _doff, _size, key, _t in INDEX_ENTRY.iter_unpack(raw[: len(raw) - len(raw) % ENTRY]):
                self._cache_last_pid[pid] = offset
                self._cache_last_key[key] = offset
                offset += ENTRY

    def _roll(self) -> None:
        """Start a new active segment; its files are open before anything switches to it, so a failure
        (a full disk, no fds) leaves the store writing where it was."""
        self.flush_pending()
        seg = self.segments[-1]
        new = _Segment(self.directory, seg.idx_end, seg.dat_base + seg.dat_len)
        fds: list[int] = []
        try:
            for path in (new.idx_path, new.dat_path):
                fds.append(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666))
        except OSError:
            for fd in fds:
                os.close(fd)
            for path in (new.idx_path, new.dat_path):
                with contextlib.suppress(OSError):
                    path.unlink()
            raise
        self.segments.append(new)
        _fsync_dir(self.directory)
        self.retired_fds += [self._wfd_dat, self._wfd_idx]
        self._wfd_idx, self._wfd_dat = fds

    def sync_targets(self) -> tuple[list[int], int]:
        """(fds to fsync, index offset that will be durable afterwards); call flush_pending first."""
        return [*self.retired_fds, self._wfd_dat, self._wfd_idx], self.written_offset

    def synced(self, offset: int, fds: Iterable[int]) -> None:
        """Called after a successful fsync of ``fds``: advance the durable offset, close retired fds."""
        if offset > self.synced_offset:
            self.synced_offset = offset
        self.sync_error = None
        done = set(fds)
        keep = []
        for fd in self.retired_fds:
            if fd in done:
                with contextlib.suppress(OSError):  # pragma: no cover
                    os.close(fd)
            else:
                keep.append(fd)
        self.retired_fds = keep

    # ---- read

    def read(
        self,
        start: int,
        partition_id: int,
        keys: frozenset[int] | None,
        max_bytes: int,
        limit_offset: int | None = None,
        max_entries: int = MAX_SCAN_ENTRIES,
    ) -> ReadResult:
        """Records of ``partition_id`` (and of the filter ``keys``) from ``start``, up to ``max_bytes``
        (the record crossing the limit is included); scans at most ``max_entries`` index entries."""
        self._flush_for_read()
        end = self.segments[-1].idx_end if limit_offset is None else min(limit_offset, self.segments[-1].idx_end)
        end = min(end, start + max_entries * ENTRY)
        chunks: list[bytes] = []
        count = 0
        total = 0
        pos = start
        last_data_end = -1
        last_msg_end = -1
        stop = False
        unpack = INDEX_ENTRY.iter_unpack
        for seg in self.segments:
            if stop or pos >= end:
                break
            if seg.idx_end <= pos:
                continue
            if seg.idx_base > pos:  # hole (should not happen): skip to this segment
                pos = seg.idx_base
            rfd_idx, rfd_dat = seg.read_fds()
            seg_end = min(end, seg.idx_end)
            raw = os.pread(rfd_idx, seg_end - pos, pos - seg.idx_base)
            run_start = -1
            run_end = -1
            scanned = 0
            for pid, doff, size, key, _t in unpack(raw[: len(raw) - len(raw) % ENTRY]):
                scanned += ENTRY
                last_data_end = doff + size
                if pid != partition_id or (keys is not None and key not in keys):
                    continue
                if doff != run_end:
                    if run_start >= 0:
                        chunks.append(os.pread(rfd_dat, run_end - run_start, run_start - seg.dat_base))
                    run_start = doff
                run_end = doff + size
                count += 1
                total += size
                if total >= max_bytes:
                    stop = True
                    break
            if run_start >= 0:
                chunks.append(os.pread(rfd_dat, run_end - run_start, run_start - seg.dat_base))
                last_msg_end = run_end
            pos += scanned
            if scanned == 0:
                break
        data_dlt = self.data_max - last_data_end if last_data_end >= 0 else self.data_max - self._data_pos(start)
        return ReadResult(chunks, count, pos, max(0, data_dlt), last_data_end, last_msg_end)

    def _data_pos(self, offset: int) -> int:
        for seg in self.segments:
            if seg.idx_base <= offset < seg.idx_end:
                rfd_idx, _ = seg.read_fds()
                raw = os.pread(rfd_idx, ENTRY, offset - seg.idx_base)
                if len(raw) == ENTRY:
                    return INDEX_ENTRY.unpack(raw)[1]
        return self.data_max

    def entry_at(self, offset: int) -> tuple[int, int, int, int, int] | None:
        """The index entry at ``offset`` (partition, data offset, size, key, time) or None."""
        self._flush_for_read()
        for seg in self.segments:
            if seg.idx_base <= offset < seg.idx_end:
                rfd_idx, _ = seg.read_fds()
                raw = os.pread(rfd_idx, ENTRY, offset - seg.idx_base)
                return INDEX_ENTRY.unpack(raw) if len(raw) == ENTRY else None
        return None

    def start_offset_by_timestamp(self, timestamp_ms: int) -> int:
        """The index offset of the first entry appended at or after ``timestamp_ms`` (``max_offset`` when
        none): the real store's ``getStartOffsetByTimeStamp``. A binary search over the append times,
        which only grow within a store, so it costs O(log n) preads (admin ``offsets_for_times``)."""
        self._flush_for_read()
        for seg in self.segments:
            count = seg.idx_len // ENTRY
            if count == 0 or self._segment_last_time(seg) < timestamp_ms:
                continue
            rfd_idx, _ = seg.read_fds()
            lo, hi = 0, count - 1  # the last entry qualifies: find the first one that does
            while lo < hi:
                mid = (lo + hi) // 2
                raw = os.pread(rfd_idx, ENTRY, mid * ENTRY)
                if len(raw) == ENTRY and INDEX_ENTRY.unpack(raw)[4] >= timestamp_ms:
                    hi = mid
                else:
                    lo = mid + 1
            return seg.idx_base + lo * ENTRY
        return self.max_offset

    # ---- retention / lifecycle

    def _segment_last_time(self, seg: _Segment) -> int:
        if seg.idx_len < ENTRY:
            return 0
        rfd_idx, _ = seg.read_fds()
        raw = os.pread(rfd_idx, ENTRY, seg.idx_len - seg.idx_len % ENTRY - ENTRY)
        return INDEX_ENTRY.unpack(raw)[4] if len(raw) == ENTRY else 0

    def apply_retention(self, now_ms: int, retention_ms: int | None, retention_bytes: int | None) -> int:
        """Delete whole old segments (never the active one); returns how many were deleted."""
        deleted = 0
        while len(self.segments) > 1:
            seg = self.segments[0]
            too_old = retention_ms is not None and self._segment_last_time(seg) < now_ms - retention_ms
            too_big = retention_bytes is not None and self.size_bytes - (seg.dat_len + seg.idx_len) >= retention_bytes
            if not (too_old or too_big):
                break
            seg.close_read()
            seg.idx_path.unlink(missing_ok=True)
            seg.dat_path.unlink(missing_ok=True)
            self.segments.pop(0)
            deleted += 1
            log.info("%s/%d: retention deleted segment at offset %d", self.topic, self.store_index, seg.idx_base)
        return deleted

    def close(self) -> None:
        if self.closed:
            return
        try:
            self.flush_pending()
        except OSError:
            log.exception("%s/%d: final flush failed", self.topic, self.store_index)
        self.closed = True
        for fd in [*self.retired_fds, self._wfd_dat, self._wfd_idx]:
            try:
                os.close(fd)
            except OSError:
                pass
        self.retired_fds = []
        self._wfd_dat = self._wfd_idx = -1
        for seg in self.segments:
            seg.close_read()


__all__ = [
    "ENTRY",
    "INDEX_ENTRY",
    "MAX_SCAN_ENTRIES",
    "REAL_RECORD_HEADER",
    "RECORD_KEY",
    "WRITE_RETRY_S",
    "DiskWriter",
    "MessageStore",
    "ReadResult",
    "WriteBatch",
    "default_writer",
    "encode_record",
    "mem_cache_bytes",
    "payload_length",
    "record_valid",
]
