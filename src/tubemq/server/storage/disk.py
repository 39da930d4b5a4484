"""The broker store's on-disk format: records, index entries, segment files and their recovery after a
crash, and the writer every write and fsync goes through (docs/PROTOCOL.md §4.9, §4.10; the store
itself is ``storage/__init__.py``)."""

from __future__ import annotations

import contextlib
import logging
import os
import struct
from pathlib import Path

from google.protobuf.message import DecodeError as PbDecodeError

from ... import codec
from ...protocol import broker_pb
from ...protocol import constants as C
from .. import wire

log = logging.getLogger("tubemq.server.storage")

INDEX_ENTRY = struct.Struct(">iqiiq")
ENTRY = C.INDEX_ENTRY_SIZE  # 28
RECORD_KEY = 0x22  # field 4 (messages), wire type 2, of GetMessageResponseB2C
#: The real broker's stored record: a 52-byte header + the data (DataStoreUtils.STORE_DATA_HEADER_LEN).
#: Capture s2 confirms it (currDataDlt 20257 = 7 records of 52 + data bytes, minus the first four).
REAL_RECORD_HEADER = 52


class DiskWriter:
    """How stores reach the disk: every data/index write and fsync goes through here, so a test can
    inject a full disk (ENOSPC after some bytes, partial writes) or a failing fsync in one place."""

    def write(self, fd: int, data: memoryview) -> int:
        return os.write(fd, data)

    def fsync(self, fd: int) -> None:
        os.fsync(fd)


class WriteBatch:
    """The appends handed to the OS together: ``written`` once they are, ``error`` if rolled back."""

    __slots__ = ("written", "error")

    def __init__(self) -> None:
        self.written = False
        self.error: OSError | None = None


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def payload_length(record: bytes) -> int:
    """Length of the payload inside one stored record (for the real-unit cache accounting)."""
    _, pos = _read_varint(record, 1)  # skip the field-4 key and the TransferedMessage length
    while pos < len(record):
        key = record[pos]
        value, pos = _read_varint(record, pos + 1)
        if key == 0x1A:  # payLoadData
            return value
        if key & 7 == 2:
            pos += value
    raise ValueError("record without payload")


def encode_record(message_id: int, checksum: int, payload: bytes, flag: int) -> bytes:
    """One stored record: the TransferedMessage wrapped as a repeated field-4 entry."""
    tm = wire.encode_transfered_message(message_id, checksum, payload, flag)
    n = len(tm)
    if n < 0x80:
        return bytes((RECORD_KEY, n)) + tm
    return wire.wrap_repeated(RECORD_KEY >> 3, (tm,))


def record_valid(record: bytes) -> bool:
    """True when ``record`` is a complete wrapped TransferedMessage whose CRC matches (§4.6)."""
    if len(record) < 2 or record[0] != RECORD_KEY:
        return False
    n = 0
    shift = 0
    pos = 1
    while pos < len(record) and pos < 6:
        b = record[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            break
    else:
        return False
    if pos + n != len(record):
        return False
    tm = broker_pb.TransferedMessage()
    try:
        tm.MergeFromString(record[pos:])
    except PbDecodeError:
        return False
    return tm.IsInitialized() and codec.crc32(tm.payLoadData) == tm.checkSum


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platform without directory fds
        return
    try:
        with contextlib.suppress(OSError):  # pragma: no cover - fs without directory fsync
            os.fsync(fd)
    finally:
        os.close(fd)


class _Segment:
    __slots__ = ("idx_base", "dat_base", "idx_len", "dat_len", "idx_path", "dat_path", "rfd_idx", "rfd_dat")

    def __init__(self, directory: Path, idx_base: int, dat_base: int) -> None:
        stem = f"{idx_base:020d}_{dat_base:020d}"
        self.idx_base = idx_base
        self.dat_base = dat_base
        self.idx_path = directory / (stem + ".idx")
        self.dat_path = directory / (stem + ".dat")
        self.idx_len = 0
        self.dat_len = 0
        self.rfd_idx = -1
        self.rfd_dat = -1

    @property
    def idx_end(self) -> int:
        return self.idx_base + self.idx_len

    def read_fds(self) -> tuple[int, int]:
        if self.rfd_idx < 0:
            self.rfd_idx = os.open(self.idx_path, os.O_RDONLY)
            self.rfd_dat = os.open(self.dat_path, os.O_RDONLY)
        return self.rfd_idx, self.rfd_dat

    def close_read(self) -> None:
        for fd in (self.rfd_idx, self.rfd_dat):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:  # pragma: no cover
                    pass
        self.rfd_idx = self.rfd_dat = -1


def load_segments(directory: Path, name: str) -> list[_Segment]:
    """The segments of a store directory, oldest first, with a torn tail cut (``recover_tail``)."""
    stems: list[tuple[int, int]] = []
    for p in directory.glob("*.idx"):
        try:
            a, b = p.stem.split("_")
            stems.append((int(a), int(b)))
        except ValueError:
            log.warning("ignoring unexpected file %s", p)
    stems.sort()
    segments = []
    for idx_base, dat_base in stems:
        seg = _Segment(directory, idx_base, dat_base)
        if not seg.dat_path.exists():
            seg.dat_path.touch()
        seg.idx_len = seg.idx_path.stat().st_size
        seg.dat_len = seg.dat_path.stat().st_size
        segments.append(seg)
    if segments:
        recover_tail(segments, name)
    return segments


def recover_tail(segments: list[_Segment], name: str) -> None:
    """Cut a torn tail: partial index entries, entries without a valid record, unindexed data (a crash
    in the middle of a write); an empty trailing segment is kept only after an intact one."""
    while True:
        seg = segments[-1]
        whole = seg.idx_len - seg.idx_len % ENTRY
        valid_end_idx = seg.idx_base
        valid_end_dat = seg.dat_base
        if whole:
            with open(seg.idx_path, "rb") as fi, open(seg.dat_path, "rb") as fd:
                pos = whole - ENTRY
                while pos >= 0:
                    fi.seek(pos)
                    _pid, doff, size, _key, _t = INDEX_ENTRY.unpack(fi.read(ENTRY))
                    rel = doff - seg.dat_base
                    if 0 <= rel and size > 0 and rel + size <= seg.dat_len:
                        fd.seek(rel)
                        if record_valid(fd.read(size)):
                            valid_end_idx = seg.idx_base + pos + ENTRY
                            valid_end_dat = doff + size
                            break
                    log.warning("%s: dropping torn index entry at offset %d", name, seg.idx_base + pos)
                    pos -= ENTRY
        new_idx = valid_end_idx - seg.idx_base
        new_dat = valid_end_dat - seg.dat_base
        if new_idx != seg.idx_len:
            os.truncate(seg.idx_path, new_idx)
            seg.idx_len = new_idx
        if new_dat != seg.dat_len:
            log.warning("%s: truncating %d unindexed data bytes", name, seg.dat_len - new_dat)
            os.truncate(seg.dat_path, new_dat)
            seg.dat_len = new_dat
        if seg.idx_len == 0 and len(segments) > 1:
            prev = segments[-2]
            if prev.idx_end == seg.idx_base and prev.dat_base + prev.dat_len == seg.dat_base:
                return
            seg.idx_path.unlink(missing_ok=True)
            seg.dat_path.unlink(missing_ok=True)
            segments.pop()
            continue
        return
