"""InLongMsg v4: the DataProxy binary message (BIN_MSG) a v4 container wraps, and its attribute keys.

A v4 message's key is Java's ``HashMap`` of its attributes joined in the map's iteration order, so this
module carries just enough of ``java.util.HashMap`` (and of Guava's splitter) to reproduce it. Decoding
is linear in the container's size for every attribute layout: one key merge per distinct private
attribute text per container, the common keys hashed and ordered once per container and table size,
and the merged key text bounded (a hostile container cannot make it quadratic). :mod:`tubemq.inlongmsg` is the public API.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from ..errors import InLongMsgError
from ._text import java_hash

#: BIN_MSG (v4 payload) layout: fixed overhead, msg_type low bits, snappy bits, trailing magic.
BIN_MSG_OVERHEAD = 29
BIN_MSG_TYPE = 7
BIN_MSG_SNAPPY = 0x20
BIN_MSG_MAGIC = 0xEE01
BIN_HEADER = struct.Struct(">iBhhhihii")  # total_len type gid sid ext dt cnt uniq body_len
U16 = struct.Struct(">H")


def decode_v4(data: bytes | bytearray, impl: Any) -> tuple[int, int, dict[str, list[bytes]], bool, bool]:
    """A v4 container: (create time in ms, message count, bodies by key, numeric ids, LF-separated).

    ``impl`` is the InLongMsg core in use (``tubemq.codec._inlongmsg`` or its twin).
    """
    n = len(data) - 4  # BIN_MSG between the two magics
    if n < BIN_MSG_OVERHEAD:
        raise InLongMsgError(f"v4 container of {len(data)} bytes: binary message truncated "
                             f"({n} bytes, at least {BIN_MSG_OVERHEAD} needed)")
    total_len, msg_type, gid, sid, ext, dt, cnt, _uniq, body_len = BIN_HEADER.unpack_from(data, 2)
    ext_u = ext & 0xFFFF
    if body_len < 0 or body_len > n - BIN_MSG_OVERHEAD:
        raise InLongMsgError(f"v4 binary message: body length {body_len} but the message has {n} bytes")
    body_start = 2 + 25
    body_end = body_start + body_len
    (attr_len,) = U16.unpack_from(data, body_end)
    if body_len + attr_len + BIN_MSG_OVERHEAD != n:
        raise InLongMsgError(f"v4 binary message: body {body_len} + attributes {attr_len} + {BIN_MSG_OVERHEAD} "
                             f"bytes of header do not make its {n} bytes")
    if total_len != n - 4:
        raise InLongMsgError(f"v4 binary message: total length field {total_len}, actual {n - 4}")
    (magic,) = U16.unpack_from(data, body_end + 2 + attr_len)
    if magic != BIN_MSG_MAGIC:
        raise InLongMsgError(f"v4 binary message: end magic {magic:#06x}, expected {BIN_MSG_MAGIC:#06x}")
    is_num = not ext_u & 0x4
    attr_raw = data[body_end + 2 : body_end + 2 + attr_len]
    common = _v4_common(bytes(attr_raw), dt, gid, sid, cnt, is_num)
    keyed: dict[str, list[bytes]]
    if (msg_type & 0xE0) >> 5 == 1:
        owner: Any = impl.snappy_uncompress(data, body_start, body_end)
        start, stop = 0, len(owner)
    else:
        owner, start, stop = data, body_start, body_end
    if not ext_u & 0x1:
        keyed = {common.key: impl.split_items(owner, start, stop)}
    else:
        keyed = {}
        # one merge per distinct private attribute text of this container (whatever its length), and
        # the merged key text bounded by the container's size: decoding stays linear in the input
        keys: dict[bytes, str] = {}
        budget = max(_V4_KEY_TEXT_MIN, _V4_KEY_TEXT_FACTOR * len(data))
        for msg, private in impl.split_pairs(owner, start, stop):
            key = keys.get(private)
            if key is None:
                key = keys[private] = _v4_private_key(private, common)
                budget -= len(key)
                if budget < 0:
                    raise InLongMsgError(
                        f"v4 container of {len(data)} bytes: its {len(keys)} private attribute strings merged "
                        f"with {len(common.items)} common attributes make over "
                        f"{max(_V4_KEY_TEXT_MIN, _V4_KEY_TEXT_FACTOR * len(data))} characters of attribute keys")
            bucket = keyed.get(key)
            if bucket is None:
                keyed[key] = [msg]
            else:
                bucket.append(msg)
    return dt * 1000, cnt, keyed, is_num, bool(ext_u & 0x20)


class _V4Common(NamedTuple):
    """The common attributes of a BIN_MSG: Java's key text, entries in Java's order, each key's spread
    hash, and (made on first use) their order in a merged map of each table size."""

    key: str
    items: list[tuple[str, str]]
    spreads: dict[str, int]
    values: dict[str, str]
    orders: dict[int, tuple[list[int], list[str], dict[str, int]]]

    def order(self, table: int) -> tuple[list[int], list[str], dict[str, int]]:
        """In a table of ``table`` buckets: the entries' buckets (ascending), their ``k=v`` texts and
        each key's index there. The entries keep ``items`` order within a bucket (their insertion order)."""
        hit = self.orders.get(table)
        if hit is None:
            mask = table - 1
            spreads = self.spreads
            ranked = sorted(self.items, key=lambda item: spreads[item[0]] & mask)
            hit = ([spreads[k] & mask for k, _ in ranked], [f"{k}={v}" for k, v in ranked],
                   {k: i for i, (k, _) in enumerate(ranked)})
            self.orders[table] = hit
        return hit


#: v4 attribute keys computed lately (the Java ``HashMap`` emulation is the slow part of a v4 decode).
_V4_KEYS: dict[tuple[Any, ...], _V4Common] = {}
_V4_PRIVATE_KEYS: dict[tuple[bytes, str], str] = {}
_KEY_CACHE_SIZE = 4096
#: Longer attribute texts are not cached across containers (bounds the caches to a few MB); within one
#: container every distinct private attribute text is merged once, whatever its length.
_KEY_CACHE_MAX_TEXT = 512
#: The attribute key text one v4 container may expand to: this many characters per container byte, and
#: at least _V4_KEY_TEXT_MIN (each distinct private attribute string repeats all the common ones; real
#: containers stay far below, a hostile one is refused instead of taking memory and time quadratic in
#: its size).
_V4_KEY_TEXT_FACTOR = 64
_V4_KEY_TEXT_MIN = 16 << 20
#: Spread hashes (Java's ``h ^ (h >>> 16)`` of ``String.hashCode``) of attribute names seen lately: the
#: names repeat from container to container.
_SPREADS: dict[str, int] = {}
_SPREAD_CACHE_SIZE = 4096
_SPREAD_CACHE_MAX_KEY = 64


def _spread(key: str) -> int:
    s = _SPREADS.get(key)
    if s is None:
        h = java_hash(key) & 0xFFFFFFFF
        s = h ^ (h >> 16)
        if len(key) <= _SPREAD_CACHE_MAX_KEY:
            if len(_SPREADS) >= _SPREAD_CACHE_SIZE:
                _SPREADS.clear()
            _SPREADS[key] = s
    return s


def _v4_common(attr: bytes, dt: int, gid: int, sid: int, cnt: int, is_num: bool) -> _V4Common:
    """The common attribute map of a BIN_MSG, computed once per container (and cached for short texts)."""
    cache_key = (attr, dt, gid, sid, cnt, is_num)
    hit = _V4_KEYS.get(cache_key)
    if hit is not None:
        return hit
    common = _JavaHashMap.copy_of(_guava_split(attr.decode("utf-8", "replace"))) if attr else _JavaHashMap()
    common.put("dt", str(dt * 1000))
    if is_num:
        common.put("groupId", str(gid))
        common.put("streamId", str(sid))
    common.put("cnt", str(cnt))
    spreads = {k: _spread(k) for k in common.entries}
    items = common.items(spreads)
    value = _V4Common("&".join(f"{k}={v}" for k, v in items), items, spreads, dict(items), {})
    if len(attr) <= _KEY_CACHE_MAX_TEXT:
        if len(_V4_KEYS) >= _KEY_CACHE_SIZE:
            _V4_KEYS.clear()
        _V4_KEYS[cache_key] = value
    return value


def _v4_private_key(private: bytes, common: _V4Common) -> str:
    """``join(HashMap(Guava(private)) + putAll(common))``: the key of one message with private attrs.

    Linear in the two maps, not a sort of both: the common entries come ordered for the merged map's
    table size (once per container and size), and the private ones are placed among them. Java's order
    is bucket, then insertion: private entries first (a key in both keeps its private place and takes
    the common value), then the common ones in ``common.items`` order.
    """
    cache_key = (private, common.key)
    hit = _V4_PRIVATE_KEYS.get(cache_key)
    if hit is not None:
        return hit
    m = _JavaHashMap.copy_of(_guava_split(private.decode("utf-8", "replace")))
    table = m.table_after_put_all(len(common.items), sum(1 for k in m.entries if k in common.values))
    buckets, texts, index = common.order(table)
    mask = table - 1
    spreads, values = common.spreads, common.values
    placed: list[tuple[int, str]] = []
    dropped: list[int] = []
    for k, v in m.entries.items():
        if k in values:
            v = values[k]
            dropped.append(index[k])
        placed.append(((spreads[k] if k in spreads else _spread(k)) & mask, f"{k}={v}"))
    placed.sort(key=lambda e: e[0])  # stable: insertion order within a bucket
    parts: list[str | None] = list(texts)
    for i in dropped:
        parts[i] = None
    out: list[str | None] = []
    prev = 0
    for bucket, text in placed:
        at = bisect.bisect_left(buckets, bucket)  # before the common entries of its bucket
        out += parts[prev:at]
        out.append(text)
        prev = at
    out += parts[prev:]
    key = "&".join([s for s in out if s is not None] if dropped else out)  # type: ignore[arg-type]
    if len(private) + len(common.key) <= _KEY_CACHE_MAX_TEXT:
        if len(_V4_PRIVATE_KEYS) >= _KEY_CACHE_SIZE:
            _V4_PRIVATE_KEYS.clear()
        _V4_PRIVATE_KEYS[cache_key] = key
    return key


#: Guava's ``CharMatcher.whitespace()`` (what ``Splitter.trimResults()`` strips).
_GUAVA_WS = ("\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
             "\u200a\u2028\u2029\u202f\u205f\u3000")


def _guava_split(text: str) -> dict[str, str]:
    """``Splitter.on('&').trimResults().withKeyValueSeparator('=')``: strict, as Java's v4 decoder."""
    out: dict[str, str] = {}
    for entry in text.split("&"):
        entry = entry.strip(_GUAVA_WS)
        parts = entry.split("=")
        if len(parts) != 2:
            raise InLongMsgError(f"v4 attributes {text!r}: entry {entry!r} is not key=value")
        key, value = parts
        if key in out:
            raise InLongMsgError(f"v4 attributes {text!r}: duplicate key {key!r}")
        out[key] = value
    return out


def _table_size_for(n: int) -> int:
    size = 1
    while size < n:
        size <<= 1
    return size


class _JavaHashMap:
    """Just enough of ``java.util.HashMap`` to reproduce its iteration order (bucket, then insertion)."""

    __slots__ = ("table", "threshold", "entries")

    def __init__(self) -> None:
        self.table = 0  # 0: not allocated yet
        self.threshold = 0
        self.entries: dict[str, str] = {}

    @classmethod
    def copy_of(cls, source: Mapping[str, str]) -> _JavaHashMap:
        m = cls()
        m.put_all(source.items())
        return m

    def _resize(self) -> None:
        if self.table == 0:
            self.table = self.threshold or 16
        else:
            self.table *= 2
        self.threshold = self.table * 3 // 4

    def put(self, key: str, value: str) -> None:
        if self.table == 0:
            self._resize()
        entries = self.entries
        if key in entries:
            entries[key] = value
            return
        entries[key] = value
        if len(entries) > self.threshold:
            self._resize()

    def put_all(self, items: Iterable[tuple[str, str]]) -> None:
        items = list(items)
        s = len(items)
        if s:
            if self.table == 0:
                t = _table_size_for(int(s / 0.75 + 1.0))
                if t > self.threshold:
                    self.threshold = t
            else:
                while s > self.threshold:
                    self._resize()
            for k, v in items:
                self.put(k, v)

    def table_after_put_all(self, count: int, present: int) -> int:
        """The table size after ``put_all`` of ``count`` entries, ``present`` of them keys it holds
        already (what ``put_all`` and ``put`` resize to, without putting anything)."""
        table, threshold = self.table, self.threshold
        if table == 0:
            t = _table_size_for(int(count / 0.75 + 1.0))
            threshold = max(threshold, t)
            table = threshold or 16  # the first put allocates
            threshold = table * 3 // 4
        else:
            while count > threshold:
                table *= 2
                threshold = table * 3 // 4
        size = len(self.entries) + count - present
        while size > threshold:
            table *= 2
            threshold = table * 3 // 4
        return table

    def items(self, spreads: Mapping[str, int] | None = None) -> list[tuple[str, str]]:
        """Entries in Java's iteration order (bucket, then insertion); ``spreads``: the keys' spread
        hashes when the caller has them."""
        mask = (self.table or 16) - 1
        spread = spreads.__getitem__ if spreads is not None else _spread
        return sorted(self.entries.items(), key=lambda item: spread(item[0]) & mask)

    def join(self) -> str:
        """``Joiner.on('&').withKeyValueSeparator('=').join(map)``."""
        return "&".join(f"{k}={v}" for k, v in self.items())
