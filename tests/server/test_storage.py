"""Storage: append/read, index offsets, segments, torn tail recovery, retention, reopen."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tubemq import codec
from tubemq.errors import ConfigError
from tubemq.server.meta import MetaStore
from tubemq.server.storage import encode_record, record_valid
from tubemq.server.storage.manager import StoreManager


def rec(i: int, data: bytes | None = None) -> bytes:
    data = data if data is not None else b"message-%06d" % i
    return encode_record(i + 1, codec.crc32(data), data, 0)


def decode(chunks: list[bytes]) -> list[bytes]:
    body = b"\x08\x01\x10\xc8\x01" + b"".join(chunks)
    res = codec.decode_get_message_response(body, "t")
    assert res.dropped == 0
    return [m.data for m in res.messages]


def filled(path: Path, count: int, store_time: Callable[[int], int] = lambda i: 1) -> tuple[StoreManager, Any]:
    """A store of small segments (4 KiB) whose partition ("t", 0) holds records 0..count-1, each
    stored at ``store_time(i)`` ms and marked dirty, nothing flushed or synced yet."""
    sm = StoreManager(path, segment_bytes=4096)
    s = sm.get("t", 0)
    for i in range(count):
        s.append(0, rec(i), -1, store_time(i))
        sm.mark_dirty(s)
    return sm, s


def test_append_read_offsets_and_partitions(tmp_path: Path) -> None:
    sm = StoreManager(tmp_path)
    s = sm.get("t", 0)
    assert (s.min_offset, s.max_offset) == (0, 0)
    offsets = [s.append(i % 2, rec(i), -1, 1000 + i) for i in range(10)]
    assert offsets == [28 * i for i in range(10)]
    r = s.read(0, 1, None, 1 << 20)
    assert r.count == 5 and r.next_offset == 280 and r.data_dlt == 0
    assert decode(r.chunks) == [b"message-%06d" % i for i in range(1, 10, 2)]
    # size limit: the record crossing the limit is included, the read stops after it
    r = s.read(0, 0, None, 1)
    assert r.count == 1 and r.next_offset == 28 and r.data_dlt > 0
    # filters by key code
    s.append(0, rec(99), 42, 1)
    r = s.read(0, 0, frozenset({42}), 1 << 20)
    assert decode(r.chunks) == [b"message-000099"]
    # scan bound and limit offset
    r = s.read(0, 0, None, 1 << 20, max_entries=3)
    assert r.next_offset == 84 and r.count == 2
    r = s.read(0, 0, None, 1 << 20, limit_offset=56)
    assert r.next_offset == 56 and r.count == 1
    assert s.entry_at(28)[0] == 1
    sm.close()


def test_reopen_keeps_everything(tmp_path: Path) -> None:
    sm, s = filled(tmp_path, 500)
    sm.flush_pending()
    assert len(s.segments) > 3
    sm.close()
    sm = StoreManager(tmp_path, segment_bytes=4096)
    s = sm.get("t", 0)
    assert s.max_offset == 500 * 28
    got: list[bytes] = []
    pos = 0
    while pos < s.max_offset:
        r = s.read(pos, 0, None, 5000)
        got += decode(r.chunks)
        pos = r.next_offset
    assert got == [b"message-%06d" % i for i in range(500)]
    assert s.append(0, rec(500), -1, 1) == 500 * 28
    sm.close()


def test_torn_tail_is_truncated(tmp_path: Path) -> None:
    sm = StoreManager(tmp_path)
    s = sm.get("t", 0)
    for i in range(10):
        s.append(0, rec(i), -1, 1)
    sm.mark_dirty(s)
    sm.close()
    idx = next(s.directory.glob("*.idx"))
    dat = idx.with_suffix(".dat")
    size = dat.stat().st_size
    # a half-written record (data without index) + a partial index entry
    with open(dat, "ab") as f:
        f.write(rec(10)[:7])
    with open(idx, "ab") as f:
        f.write(b"\x00" * 13)
    # and a last index entry whose record got corrupted
    with open(dat, "r+b") as f:
        f.seek(size - 3)
        f.write(b"\xff\xff\xff")
    s = StoreManager(tmp_path).get("t", 0)
    assert s.max_offset == 9 * 28
    assert idx.stat().st_size == 9 * 28
    r = s.read(0, 0, None, 1 << 20)
    assert decode(r.chunks) == [b"message-%06d" % i for i in range(9)]
    assert s.append(0, rec(10), -1, 1) == 9 * 28


def test_record_valid() -> None:
    good = rec(1)
    assert record_valid(good)
    assert not record_valid(good[:-1])
    assert not record_valid(b"\x00" + good[1:])
    bad = bytearray(good)
    bad[-3] ^= 0xFF
    assert not record_valid(bytes(bad))


def test_retention_by_size_and_age(tmp_path: Path) -> None:
    old = int(time.time() * 1000) - 3_600_000
    sm, s = filled(tmp_path, 400, lambda i: old if i < 200 else int(time.time() * 1000))
    sm.flush_pending()
    n_segments = len(s.segments)
    assert sm.apply_retention(60_000, None) > 0
    assert s.min_offset > 0 and len(s.segments) < n_segments
    # everything left is recent except possibly the first kept segment's head
    first = s.entry_at(s.min_offset)
    assert first is not None
    before = s.size_bytes
    assert sm.apply_retention(None, 5_000) > 0
    assert 5_000 <= s.size_bytes < before
    assert s.max_offset == 400 * 28  # offsets never move back
    r = s.read(s.min_offset, 0, None, 1 << 20)
    assert r.count > 0
    sm.close()


def test_fsync_bookkeeping(tmp_path: Path) -> None:
    sm, s = filled(tmp_path, 300)
    assert s.synced_offset == 0
    sm.sync_now()
    assert s.synced_offset == s.written_offset == s.max_offset
    assert s.retired_fds == []


def test_drop_topic(tmp_path: Path) -> None:
    sm = StoreManager(tmp_path)
    s = sm.get("t", 0)
    s.append(0, rec(0), -1, 1)
    sm.mark_dirty(s)
    sm.drop_topic("t")
    assert not (tmp_path / "store" / "t").exists()
    assert sm.get("t", 0).max_offset == 0


def test_meta_store_persistence_and_validation(tmp_path: Path) -> None:
    meta = MetaStore(tmp_path)
    calls: list[int] = []
    meta.on_change.append(lambda: calls.append(1))
    conf = meta.create_topic("topic_a", 4, 2, 2 * 1024 * 1024)
    assert conf.partition_ids() == [0, 1, 2, 3, 10000, 10001, 10002, 10003]
    for bad in ("1abc", "a", "bad-name", "x" * 65, "__offset_history__"):
        with pytest.raises(ConfigError):
            meta.create_topic(bad)
    with pytest.raises(ConfigError):
        meta.create_topic("topic_a")
    with pytest.raises(ConfigError):
        meta.create_topic("topic_b", partitions=0)
    meta.update_topic("topic_a", closed=True)
    assert calls == [1, 1]
    again = MetaStore(tmp_path)
    t = again.get("topic_a")
    assert t is not None and t.closed and t.num_stores == 2 and t.max_msg_size == 2 * 1024 * 1024
    assert again.delete_topic("topic_a") and not again.delete_topic("topic_a")
    assert MetaStore(tmp_path).topics() == []
    before = again.broker_checksum
    from tubemq.server.meta import BrokerEntry

    again.set_broker(BrokerEntry(1, "127.0.0.1", 8123))
    assert again.broker_checksum > before and again.config_id == -2
    assert not list(tmp_path.glob("*.tmp"))
    assert os.path.exists(tmp_path / "meta.json")
