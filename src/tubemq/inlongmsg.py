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
a snappy block may declare at most 22x its own size (no valid block expands more). Decoding time is
linear in the container size; a v4 container whose per-message attribute keys (private + common
attributes) would come to over 64 characters per container byte (at least 16 MiB) is refused
(:mod:`tubemq.codec._inlong_v4`).

Decoding snappy needs nothing extra (a raw-snappy decoder is built in); building with ``compress=True``
needs the optional ``cramjam`` package: ``pip install cramjam`` (the ``inlong`` extra).

The hot paths are in the Cython module ``tubemq.codec._inlongmsg``; the pure-Python twin
``tubemq.codec._inlongmsg_py`` is used, as :mod:`tubemq.codec` uses its own, with ``TUBEMQ_NO_EXTENSIONS=1``
or when the extension was not built. ``implementation`` says which one is live.
"""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from .codec._inlong_v4 import BIN_HEADER as _BIN_HEADER
from .codec._inlong_v4 import BIN_MSG_MAGIC, BIN_MSG_OVERHEAD, BIN_MSG_SNAPPY, BIN_MSG_TYPE, decode_v4
from .codec._inlong_v4 import U16 as _U16
from .errors import InLongMsgError

# The same choice as tubemq.codec makes (not asked of it: the codec's Message.inlongmsg() imports this
# module, so this one stays below the codec and imports none of it).
if os.environ.get("TUBEMQ_NO_EXTENSIONS", "") not in ("", "0"):
    from .codec import _inlongmsg_py as _impl
else:
    try:
        from .codec import _inlongmsg as _impl  # type: ignore[no-redef]
    except ImportError:  # pragma: no cover - exercised when the extension was not built
        from .codec import _inlongmsg_py as _impl  # type: ignore[no-redef]

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
        create_time, count, keyed, is_num, is_lf = decode_v4(data, _impl)
        return InLongMsg(4, create_time, count, -1, keyed, None, is_num, is_lf)
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
