"""InLongMsg (a.k.a. TDMsg): the container Apache InLong's DataProxy writes into TubeMQ.

A TubeMQ message on an InLong topic is one container holding many records, each record a body plus
an attribute string ``k=v&k=v`` (``groupId``, ``streamId``, ``dt``...). :func:`decode` reads every
version the upstream Java class ``org.apache.inlong.common.msg.InLongMsg`` reads (v0-v4, raw or
snappy, the binary v4 message with its Java ``HashMap``-ordered attribute keys);
:class:`InLongMsgBuilder` writes v1-v4 byte for byte like the Java class (snappy output is
compatible, not necessarily identical). :func:`parse_attr` splits attribute strings the way InLong
Sort does.

Damaged input raises :class:`tubemq.errors.InLongMsgError` (a ``DecodeError``), also where the Java
class would return zero-padded bodies, accept a length running into the trailing magic, or stop
silently. Decoding allocates at most the input size in body bytes (plus one Python object per body);
a snappy block may declare at most 22x its own size (no valid block expands more).

Decoding snappy needs nothing extra (a raw-snappy decoder is built in); building with ``compress=True``
needs the optional ``cramjam`` package: ``pip install 'tubemq[inlong]'``.

The hot paths are in the Cython module ``tubemq._inlongmsg``; the pure-Python twin
``tubemq._inlongmsg_py`` is used, as :mod:`tubemq.codec` uses its own, with ``TUBEMQ_NO_EXTENSIONS=1``
or when the extension was not built. ``implementation`` says which one is live.
"""

from __future__ import annotations

import bisect
import os
import struct
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, NamedTuple

from ._text import java_hash
from .errors import InLongMsgError

# The same choice as tubemq.codec makes (not asked of it: the codec's Message.inlongmsg() imports this
# module, so this one stays below the codec and imports none of it).
if os.environ.get("TUBEMQ_NO_EXTENSIONS", "") not in ("", "0"):
    from . import _inlongmsg_py as _impl
else:
    try:
        from . import _inlongmsg as _impl  # type: ignore[no-redef]
    except ImportError:  # pragma: no cover - exercised when the extension was not built
        from . import _inlongmsg_py as _impl  # type: ignore[no-redef]

implementation: str = _impl.implementation

__all__ = [
    "InLongMsg",
    "InLongMsgBuilder",
    "InLongMsgError",
    "binary_message",
    "decode",
    "decode_message",
    "implementation",
    "parse_attr",
    "SNAPPY_EXTRA",
]

SNAPPY_EXTRA = _impl.SNAPPY_EXTRA

#: BIN_MSG (v4 payload) layout: fixed overhead, msg_type low bits, snappy bits, trailing magic.
BIN_MSG_OVERHEAD = 29
BIN_MSG_TYPE = 7
BIN_MSG_SNAPPY = 0x20
BIN_MSG_MAGIC = 0xEE01
_BIN_HEADER = struct.Struct(">iBhhhihii")  # total_len type gid sid ext dt cnt uniq body_len
_U16 = struct.Struct(">H")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class InLongMsg:
    """One decoded container: header fields plus bodies grouped by attribute string.

    ``attrs`` is in the order Java's ``getAttrs()`` returns (first appearance; for v4 the key text is
    Java's ``HashMap`` order). Iterating yields ``(attr, body)`` pairs; :meth:`records` yields
    ``(attributes dict, body)``.
    """

    __slots__ = ("version", "create_time", "msg_count", "attr_count", "is_num_group_id", "is_support_lf",
                 "attrs", "_bodies", "_counts")

    def __init__(self, version: int, create_time: int, msg_count: int, attr_count: int,
                 groups: dict[str, list[bytes]], counts: dict[str, int] | None = None,
                 is_num_group_id: bool = False, is_support_lf: bool = False) -> None:
        self.version = version
        #: Milliseconds (``build(create_time)`` for v1-v3, the BIN_MSG data time x 1000 for v4, -1 for v0).
        self.create_time = create_time
        #: The header's message count (0 for v0/v1, as Java's ``getMsgCnt()``).
        self.msg_count = msg_count
        #: The header's group count (-1 for v4, as Java's ``getAttrCount()``).
        self.attr_count = attr_count
        self.is_num_group_id = is_num_group_id
        self.is_support_lf = is_support_lf
        self.attrs: tuple[str, ...] = tuple(groups)
        self._bodies = groups
        self._counts = counts or {}

    def bodies(self, attr: str) -> list[bytes]:
        """The bodies stored under ``attr``, in order (KeyError if the container has no such attr)."""
        return self._bodies[attr]

    def attr_msg_count(self, attr: str) -> int:
        """The per-group message count a v2 container stores (0 for the other versions, like Java)."""
        if attr not in self._bodies:
            raise KeyError(attr)
        return self._counts.get(attr, 0)

    def __iter__(self) -> Iterator[tuple[str, bytes]]:
        for attr, bodies in self._bodies.items():
            for body in bodies:
                yield attr, body

    def records(self) -> Iterator[tuple[dict[str, str], bytes]]:
        """``(parse_attr(attr), body)`` per record; each record gets its own dict."""
        for attr, bodies in self._bodies.items():
            kv = parse_attr(attr)
            for body in bodies:
                yield dict(kv), body

    def __len__(self) -> int:
        """The number of records (bodies) in the container."""
        return sum(len(b) for b in self._bodies.values())

    def __repr__(self) -> str:
        return (f"InLongMsg(version={self.version}, create_time={self.create_time}, attrs={len(self.attrs)}, "
                f"records={len(self)})")


def decode(data: bytes | bytearray | memoryview) -> InLongMsg:
    """Decode one container (a TubeMQ message body on an InLong topic); raises InLongMsgError."""
    if not isinstance(data, (bytes, bytearray)):
        data = bytes(data)
    version = _impl.container_version(data)
    if version == 4:
        return _decode_v4(data)
    if version == 3:
        return _decode_v3(data)
    version, create_time, msg_count, attr_count, groups, counts = _impl.decode_default(data)
    return InLongMsg(version, create_time, msg_count, attr_count, groups, counts if version == 2 else None)


def decode_message(msg: Any) -> InLongMsg:
    """Decode a consumed :class:`tubemq.Message` (its ``data``) as an InLongMsg container."""
    return decode(msg.data)


def _decode_v3(data: bytes | bytearray) -> InLongMsg:
    """v3 ("mix attr"): each group holds records of (message, private attr) pairs; key = common & private."""
    version, create_time, msg_count, groups = _impl.read_groups(data)
    keyed: dict[str, list[bytes]] = {}
    for attr, _cnt, owner, start, stop in groups:
        for record in _impl.split_items(owner, start, stop):
            for msg, private in _impl.split_pairs(record, 0, len(record)):
                key = attr + "&" + private.decode("utf-8", "replace")
                bucket = keyed.get(key)
                if bucket is None:
                    keyed[key] = [msg]
                else:
                    bucket.append(msg)
    (attr_count,) = _I32.unpack_from(data, 14)
    return InLongMsg(version, create_time, msg_count, attr_count, keyed)


# ---- v4 (binary message)


def _decode_v4(data: bytes | bytearray) -> InLongMsg:
    n = len(data) - 4  # BIN_MSG between the two magics
    if n < BIN_MSG_OVERHEAD:
        raise InLongMsgError(f"v4 container of {len(data)} bytes: binary message truncated "
                             f"({n} bytes, at least {BIN_MSG_OVERHEAD} needed)")
    total_len, msg_type, gid, sid, ext, dt, cnt, _uniq, body_len = _BIN_HEADER.unpack_from(data, 2)
    ext_u = ext & 0xFFFF
    if body_len < 0 or body_len > n - BIN_MSG_OVERHEAD:
        raise InLongMsgError(f"v4 binary message: body length {body_len} but the message has {n} bytes")
    body_start = 2 + 25
    body_end = body_start + body_len
    (attr_len,) = _U16.unpack_from(data, body_end)
    if body_len + attr_len + BIN_MSG_OVERHEAD != n:
        raise InLongMsgError(f"v4 binary message: body {body_len} + attributes {attr_len} + {BIN_MSG_OVERHEAD} "
                             f"bytes of header do not make its {n} bytes")
    if total_len != n - 4:
        raise InLongMsgError(f"v4 binary message: total length field {total_len}, actual {n - 4}")
    (magic,) = _U16.unpack_from(data, body_end + 2 + attr_len)
    if magic != BIN_MSG_MAGIC:
        raise InLongMsgError(f"v4 binary message: end magic {magic:#06x}, expected {BIN_MSG_MAGIC:#06x}")
    is_num = not ext_u & 0x4
    attr_raw = data[body_end + 2 : body_end + 2 + attr_len]
    common = _v4_common(bytes(attr_raw), dt, gid, sid, cnt, is_num)
    keyed: dict[str, list[bytes]]
    if (msg_type & 0xE0) >> 5 == 1:
        owner: Any = _impl.snappy_uncompress(data, body_start, body_end)
        start, stop = 0, len(owner)
    else:
        owner, start, stop = data, body_start, body_end
    if not ext_u & 0x1:
        keyed = {common.key: _impl.split_items(owner, start, stop)}
    else:
        keyed = {}
        # one merge per distinct private attribute text of this container (whatever its length), and
        # the merged key text bounded by the container's size: decoding stays linear in the input
        keys: dict[bytes, str] = {}
        budget = max(_V4_KEY_TEXT_MIN, _V4_KEY_TEXT_FACTOR * len(data))
        for msg, private in _impl.split_pairs(owner, start, stop):
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
    return InLongMsg(4, dt * 1000, cnt, -1, keyed, None, is_num, bool(ext_u & 0x20))


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


# ---- attribute strings


def parse_attr(attr: str) -> dict[str, str]:
    """Split ``k=v&k=v`` exactly as InLong Sort does (``InLongMsgUtils.parseAttr``).

    The first ``=`` ends a key (later ones belong to the value); ``&`` inside a key is kept; ``&&``
    inside a value keeps one ``&``; text after the last ``&`` without ``=`` is appended to the previous
    value; nothing is trimmed; a later duplicate key wins; a string without ``=`` gives ``{}``.
    """
    if "=" not in attr:
        return {}
    if "&&" not in attr and attr[-1] != "&":
        # fast path: well-formed k=v&k=v (what DataProxy writes)
        fields: dict[str, str] = {}
        ok = True
        for entry in attr.split("&"):
            key, sep, value = entry.partition("=")
            if not sep:
                ok = False
                break
            fields[key] = value
        if ok:
            return fields
    return _parse_attr_slow(attr)


def _parse_attr_slow(text: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    buf: list[str] = []
    key = ""
    last_key: str | None = None
    last_value: str | None = None
    in_value = False
    n = len(text)
    for i, ch in enumerate(text):
        if ch == "=":
            if in_value:
                buf.append(ch)
            else:
                key = "".join(buf)
                buf.clear()
                in_value = True
        elif ch == "&":
            if not in_value:
                buf.append(ch)
            elif i + 1 < n and text[i + 1] == "&":
                buf.append(ch)
            else:
                value = "".join(buf)
                fields[key] = value
                last_key, last_value = key, value
                buf.clear()
                in_value = False
        else:
            buf.append(ch)
    if in_value:
        fields[key] = "".join(buf)
    elif last_key is not None and last_value is not None:
        fields[last_key] = last_value + "&" + "".join(buf)
    return fields


def format_attr(attributes: Mapping[str, str]) -> str:
    """``{k: v}`` -> ``k=v&k=v`` (insertion order), refusing what :func:`parse_attr` cannot read back."""
    parts = []
    for k, v in attributes.items():
        k, v = str(k), str(v)
        if not k or "=" in k or "&" in k or "&" in v:
            raise ValueError(f"attribute {k!r}={v!r} cannot be written into an InLongMsg attribute string")
        parts.append(f"{k}={v}")
    return "&".join(parts)


# ---- building


def binary_message(
    bodies: Iterable[bytes | bytearray | memoryview],
    attrs: str = "",
    *,
    group_id: int = 0,
    stream_id: int = 0,
    data_time: int | None = None,
    ext: int = 0,
    uniq: int = 0,
    private_attrs: Iterable[str] | None = None,
    msg_type: int = BIN_MSG_TYPE,
) -> bytes:
    """A DataProxy BIN_MSG (what a v4 container wraps) holding ``bodies``, uncompressed.

    ``data_time`` is in seconds (default: now); ``group_id``/``stream_id`` are the numeric ids (16 bits)
    and ``ext`` the extension bits (0x4: ids are strings in ``attrs``; 0x20: LF-separated). With
    ``private_attrs`` (one attribute string per body) the body carries per-message attributes and
    ext bit 0x1 is set.
    """
    body = bytearray()
    items = [bytes(b) for b in bodies]
    if private_attrs is not None:
        privs = [p.encode("utf-8") for p in private_attrs]
        if len(privs) != len(items):
            raise ValueError(f"{len(items)} bodies but {len(privs)} private attribute strings")
        for item, priv in zip(items, privs, strict=True):
            if not item or not priv:
                raise ValueError("with private attributes, bodies and attribute strings must not be empty")
            body += _I32.pack(len(item)) + item + _I32.pack(len(priv)) + priv
        ext |= 0x1
    else:
        for item in items:
            body += _I32.pack(len(item)) + item
    attr_raw = attrs.encode("utf-8")
    if len(attr_raw) > 0x7FFF:
        raise ValueError(f"binary message attributes of {len(attr_raw)} bytes (at most {0x7FFF})")
    if len(items) > 0x7FFF:
        raise ValueError(f"{len(items)} bodies in one binary message (its count field holds at most {0x7FFF})")
    if data_time is None:
        data_time = int(time.time())
    out = bytearray(_BIN_HEADER.pack(len(body) + len(attr_raw) + BIN_MSG_OVERHEAD - 4, msg_type & 0xFF,
                                     _s16(group_id), _s16(stream_id), _s16(ext), _s32(data_time),
                                     len(items), _s32(uniq), len(body)))
    out += body
    out += _U16.pack(len(attr_raw)) + attr_raw + _U16.pack(BIN_MSG_MAGIC)
    return bytes(out)


def _s16(v: int) -> int:
    return ((v + 0x8000) & 0xFFFF) - 0x8000


def _s32(v: int) -> int:
    return ((v + 0x80000000) & 0xFFFFFFFF) - 0x80000000


class InLongMsgBuilder:
    """Packs records into one container, like ``InLongMsg.newInLongMsg(capacity, compress, version)``.

    ``add(attr, body)`` groups bodies by attribute string (v1-v3; for v3 a body is a record
    ``([len][msg][len][private attr])+``) and returns False once the size estimate reached
    ``capacity`` -- the body is stored anyway, as Java does: build and start a new builder then.
    ``add_binary(bin_msg)`` sets the single binary message of a v4 container (see
    :func:`binary_message`). ``build(create_time=None)`` returns the container bytes; the create time
    is in ms (default: now). With ``compress`` each group (v4: the body) is one raw snappy block.
    Bad arguments (a v3 record that is not length-prefixed items, an attr longer than 65535 bytes in
    modified UTF-8, a malformed binary message) raise ValueError.
    """

    def __init__(self, version: int = 1, compress: bool = True, capacity: int = 4096) -> None:
        self._core = _impl.BuilderBase(version, compress, capacity)
        self.add = self._core.add  # type: ignore[method-assign]  # the hot path, without a wrapper call
        self.version = version
        self.compress = bool(compress)
        self.capacity = capacity
        self._bin: bytes | None = None
        self._bin_count = 0

    def add(self, attr: str, body: bytes | bytearray | memoryview) -> bool:
        """Store ``body`` under ``attr``; False once full (replaced per instance by the fast core's)."""
        return bool(self._core.add(attr, body))

    @property
    def msg_count(self) -> int:
        """Messages added (v3: pairs per record; v4: the binary message's count field)."""
        return self._bin_count if self.version == 4 else int(self._core.msg_count)

    def __len__(self) -> int:
        return self.msg_count

    @property
    def size_estimate(self) -> int:
        """The Java class's running size estimate (what ``capacity`` is compared with)."""
        return int(self._core.size_estimate)

    def is_full(self) -> bool:
        """True once the size estimate reached ``capacity`` (Java's ``isfull``)."""
        return bool(self._core.is_full())

    def add_binary(self, bin_msg: bytes | bytearray | memoryview) -> None:
        """Set the BIN_MSG of a v4 container (exactly one; its lengths and 0xEE01 magic are checked)."""
        if self.version != 4:
            raise ValueError(f"add_binary() is for v4 containers, this builder makes v{self.version}")
        if self._bin is not None:
            raise ValueError("a v4 container holds exactly one binary message")
        raw = bytes(bin_msg)
        if len(raw) < BIN_MSG_OVERHEAD:
            raise ValueError(f"binary message of {len(raw)} bytes (at least {BIN_MSG_OVERHEAD})")
        (total_len,) = _I32.unpack_from(raw, 0)
        (body_len,) = _I32.unpack_from(raw, 21)
        if body_len < 0 or 25 + body_len + 2 > len(raw):
            raise ValueError(f"binary message: body length {body_len} does not fit its {len(raw)} bytes")
        (attr_len,) = _U16.unpack_from(raw, 25 + body_len)
        if total_len + 4 != body_len + attr_len + BIN_MSG_OVERHEAD or total_len + 4 != len(raw):
            raise ValueError(f"binary message: total length {total_len} does not match body {body_len} + "
                             f"attributes {attr_len} ({len(raw)} bytes)")
        (magic,) = _U16.unpack_from(raw, len(raw) - 2)
        if magic != BIN_MSG_MAGIC:
            raise ValueError(f"binary message: end magic {magic:#06x}, expected {BIN_MSG_MAGIC:#06x}")
        self._bin = raw
        (self._bin_count,) = _I16.unpack_from(raw, 15)

    def build(self, create_time: int | None = None) -> bytes:
        """The container bytes (``create_time`` in ms, default now; unused by v4)."""
        if create_time is None:
            create_time = int(time.time() * 1000)
        if self.version != 4:
            return bytes(self._core.build(create_time))
        raw = self._bin
        if raw is None:
            raise ValueError("a v4 container needs its binary message: call add_binary() first")
        if raw[4] & 0xE0 == 0 and self.compress:
            (body_len,) = _I32.unpack_from(raw, 21)
            packed = _impl.snappy_compress(memoryview(raw)[25 : 25 + body_len])
            tail = raw[25 + body_len :]
            header = bytearray(raw[:25])
            header[4] = raw[4] | BIN_MSG_SNAPPY
            _I32.pack_into(header, 0, len(packed) + len(tail) - 4 + BIN_MSG_OVERHEAD - 4)
            _I32.pack_into(header, 21, len(packed))
            raw = bytes(header) + packed + tail
        return b"\x0f\x04" + raw + b"\x0f\x04"
