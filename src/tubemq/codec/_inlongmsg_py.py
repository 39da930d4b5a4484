"""Pure-Python twin of ``tubemq.codec._inlongmsg``: the InLongMsg (TDMsg) hot paths.

Same contract as the Cython module (see ``_inlongmsg.pyi``); :mod:`tubemq.inlongmsg` picks one the way
:mod:`tubemq.codec` does. Everything here is strict where upstream Java is lenient: a length that runs
past its container, a short read Java would zero-pad, stray bytes at the end of a group or record,
bad snappy -- all raise :class:`tubemq.errors.InLongMsgError` instead of returning partial data.

Memory is bounded by the input: bodies are copies of input slices, and a snappy block may declare
at most ``SNAPPY_MAX_RATIO`` times its own size (no valid snappy block expands more than ~21.4x).
Decoding snappy needs no package (cramjam is used when installed); building with compression does.
"""

from __future__ import annotations

import struct
from typing import Any

from .._imports import install_hint
from ..errors import InLongMsgError

implementation = "python"

#: Magic first and last two bytes per version (0f 0V).
MAGIC_BYTE = 0x0F
#: A snappy block may declare at most this many times its compressed size (valid snappy: <= 21.34x).
SNAPPY_MAX_RATIO = 22
#: Longest attribute ``DataOutputStream.writeUTF`` can write (modified UTF-8 bytes).
MAX_ATTR_BYTES = 65535
#: The ``pip install`` extra that brings the snappy library.
SNAPPY_EXTRA = "tubemq[inlong]"  # kept: tubemq.inlongmsg exports it

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U16 = struct.Struct(">H")
_unpack_i32 = _I32.unpack_from

_snappy: Any = None


def _snappy_module() -> Any:
    """``cramjam.snappy``, imported on first use (the extra is optional)."""
    global _snappy
    if _snappy is None:
        try:
            import cramjam
        except ImportError:
            raise InLongMsgError(
                f"snappy-compressed InLongMsg needs the 'cramjam' package: {install_hint('inlong')}"
            ) from None
        _snappy = cramjam.snappy
    return _snappy


def snappy_length(buf: Any, start: int, end: int) -> int:
    """The uncompressed length a raw snappy block declares (its varint preamble), bounds-checked."""
    value = 0
    shift = 0
    pos = start
    while True:
        if pos >= end or shift > 28:
            raise InLongMsgError(f"snappy block at offset {start}: bad length preamble")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
    if value > 0xFFFFFFFF:
        raise InLongMsgError(f"snappy block at offset {start}: bad length preamble")
    if value > SNAPPY_MAX_RATIO * (end - start) + 16:
        raise InLongMsgError(
            f"snappy block at offset {start} ({end - start} bytes) claims {value} bytes uncompressed, "
            f"more than {SNAPPY_MAX_RATIO}x its size"
        )
    return value


def snappy_uncompress(buf: Any, start: int, end: int) -> bytes:
    """Uncompress the raw snappy block ``buf[start:end]`` into exactly its declared length.

    Uses cramjam when installed, else :func:`unsnappy` (pure Python, slow but dependency-free).
    """
    size = snappy_length(buf, start, end)
    try:
        snappy = _snappy_module()
    except InLongMsgError:
        return unsnappy(buf, start, end)
    out = bytearray(size)
    try:
        got = snappy.decompress_raw_into(bytes(buf[start:end]), out)
    except Exception as exc:  # noqa: BLE001 - cramjam raises its own DecompressionError
        raise InLongMsgError(f"snappy block at offset {start}: {exc}") from None
    if got != size:
        raise InLongMsgError(f"snappy block at offset {start}: {got} bytes instead of the declared {size}")
    return bytes(out)


def unsnappy(buf: Any, start: int, end: int) -> bytes:
    """Pure-Python raw snappy decoder (the format's literal and copy elements), strict about every length."""
    size = snappy_length(buf, start, end)
    ip = start
    while buf[ip] & 0x80:
        ip += 1
    ip += 1
    out = bytearray()
    bad = InLongMsgError(f"snappy block at offset {start}: corrupt or truncated data")
    while ip < end:
        tag = buf[ip]
        ip += 1
        kind = tag & 3
        if kind == 0:
            ln = tag >> 2
            if ln >= 60:
                extra = ln - 59
                if end - ip < extra:
                    raise bad
                ln = int.from_bytes(bytes(buf[ip : ip + extra]), "little")
                ip += extra
            ln += 1
            if ln > end - ip or ln > size - len(out):
                raise bad
            out += buf[ip : ip + ln]
            ip += ln
            continue
        if kind == 1:
            if ip >= end:
                raise bad
            ln = ((tag >> 2) & 7) + 4
            off = ((tag >> 5) << 8) | buf[ip]
            ip += 1
        else:
            width = 2 if kind == 2 else 4
            if end - ip < width:
                raise bad
            ln = (tag >> 2) + 1
            off = int.from_bytes(bytes(buf[ip : ip + width]), "little")
            ip += width
        pos = len(out)
        if off == 0 or off > pos or ln > size - pos:
            raise bad
        if off >= ln:
            out += out[pos - off : pos - off + ln]
        else:
            for k in range(ln):
                out.append(out[pos - off + k])
    if len(out) != size:
        raise bad
    return bytes(out)


def snappy_compress(data: Any) -> bytes:
    """One raw snappy block (not the framed format), as the Java class writes."""
    return bytes(_snappy_module().compress_raw(bytes(data)))


# ---- modified UTF-8 (DataOutputStream.writeUTF / DataInputStream.readUTF)


def decode_mutf8(raw: bytes, where: int = 0) -> str:
    """Java's ``readUTF`` body: modified UTF-8 -> str (surrogate pairs joined, lone ones kept)."""
    if raw.isascii() and b"\x00" not in raw:
        return raw.decode("ascii")
    units: list[int] = []
    i, n = 0, len(raw)
    while i < n:
        c = raw[i]
        top = c >> 4
        if top < 8:
            units.append(c)
            i += 1
        elif top in (12, 13):
            if i + 1 >= n or raw[i + 1] & 0xC0 != 0x80:
                raise InLongMsgError(f"attribute at offset {where}: malformed modified UTF-8 at byte {i}")
            units.append(((c & 0x1F) << 6) | (raw[i + 1] & 0x3F))
            i += 2
        elif top == 14:
            if i + 2 >= n or raw[i + 1] & 0xC0 != 0x80 or raw[i + 2] & 0xC0 != 0x80:
                raise InLongMsgError(f"attribute at offset {where}: malformed modified UTF-8 at byte {i}")
            units.append(((c & 0x0F) << 12) | ((raw[i + 1] & 0x3F) << 6) | (raw[i + 2] & 0x3F))
            i += 3
        else:
            raise InLongMsgError(f"attribute at offset {where}: malformed modified UTF-8 at byte {i}")
    return struct.pack(f"<{len(units)}H", *units).decode("utf-16-le", "surrogatepass")


def encode_mutf8(text: str) -> bytes:
    """Java's ``writeUTF`` body: str -> modified UTF-8 (NUL as C0 80, non-BMP as two 3-byte surrogates)."""
    if text.isascii() and "\x00" not in text:
        return text.encode("ascii")
    raw = text.encode("utf-16-le", "surrogatepass")
    out = bytearray()
    for (u,) in struct.iter_unpack("<H", raw):
        if 0 < u < 0x80:
            out.append(u)
        elif u < 0x800:
            out += bytes((0xC0 | (u >> 6), 0x80 | (u & 0x3F)))
        else:
            out += bytes((0xE0 | (u >> 12), 0x80 | ((u >> 6) & 0x3F), 0x80 | (u & 0x3F)))
    return bytes(out)


def java_length(text: str) -> int:
    """``String.length()``: UTF-16 code units (the Java class's capacity estimate counts these)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


# ---- item lists


def _walk_items(buf: Any, start: int, end: int, out: list[bytes] | None) -> int:
    """``([int32 len][len bytes])*`` exactly filling ``buf[start:end]``: the number of items, each copied
    into ``out`` unless it is None (the decoder splits bodies with it; the builder checks a v3 record)."""
    items = 0
    pos = start
    mv = memoryview(buf)
    while pos < end:
        if end - pos < 4:
            raise InLongMsgError(f"item at offset {pos}: {end - pos} stray bytes where a 4-byte length belongs")
        (n,) = _unpack_i32(buf, pos)
        pos += 4
        if n < 0 or n > end - pos:
            raise InLongMsgError(f"item at offset {pos - 4}: length {n} but {end - pos} bytes are left")
        if out is not None:
            out.append(bytes(mv[pos : pos + n]))
        pos += n
        items += 1
    return items


def split_items(buf: Any, start: int, end: int) -> list[bytes]:
    """``([int32 len][len bytes])*`` exactly filling ``buf[start:end]`` -> the bodies (copies)."""
    out: list[bytes] = []
    _walk_items(buf, start, end, out)
    return out


def split_pairs(buf: Any, start: int, end: int) -> list[tuple[bytes, bytes]]:
    """``([int32 len][msg][int32 len][attr])*`` exactly filling ``buf[start:end]`` -> (msg, attr) pairs.

    Both lengths must be > 0, as the Java decoder requires (it stops silently otherwise).
    """
    items = split_items(buf, start, end)
    if len(items) % 2:
        raise InLongMsgError(f"record at offset {start}: {len(items)} items, not (message, attribute) pairs")
    for i, item in enumerate(items):
        if not item:
            raise InLongMsgError(f"record at offset {start}: item {i} is empty (the Java decoder stops there)")
    return list(zip(items[::2], items[1::2], strict=True))


# ---- v0/v1/v2/v3 containers


def container_version(buf: Any) -> int:
    """The version both magics agree on (``getMagic``), or raise."""
    n = len(buf)
    if n < 4:
        raise InLongMsgError(f"not an InLongMsg container: {n} bytes, at least 4 needed")
    v = buf[1]
    if buf[0] != MAGIC_BYTE or buf[n - 2] != MAGIC_BYTE or buf[n - 1] != v or v > 4:
        raise InLongMsgError(
            f"not an InLongMsg container: magic {bytes(buf[:2]).hex()} ... {bytes(buf[n - 2:]).hex()} "
            "(expected 0f0V ... 0f0V with V in 0-4)"
        )
    return int(v)


def read_groups(buf: Any) -> tuple[int, int, int, list[tuple[str, int, Any, int, int]]]:
    """Header and groups of a v0-v3 container.

    Returns ``(version, create_time, msg_count, groups)`` where each group is ``(attr, attr_msg_count,
    owner, start, end)``: its uncompressed payload is ``owner[start:end]`` (the input itself, or the
    uncompressed snappy block).
    """
    version = container_version(buf)
    if version == 4:
        raise InLongMsgError("a v4 container has no groups")
    end = len(buf) - 2
    pos = 2
    create_time = -1
    msg_count = 0
    need = (8 if version >= 1 else 0) + (4 if version >= 2 else 0) + 4
    if end - pos < need:
        raise InLongMsgError(f"v{version} container of {len(buf)} bytes: header truncated")
    if version >= 1:
        (create_time,) = _I64.unpack_from(buf, pos)
        pos += 8
    if version >= 2:
        (msg_count,) = _unpack_i32(buf, pos)
        pos += 4
        if msg_count < 0 and version == 3:  # v3 pre-sizes a map with it (Java throws)
            raise InLongMsgError(f"v{version} container: negative message count {msg_count}")
    (attr_count,) = _unpack_i32(buf, pos)
    pos += 4
    if attr_count < 0:
        raise InLongMsgError(f"v{version} container: negative attribute count {attr_count}")
    groups: list[tuple[str, int, Any, int, int]] = []
    per_group = 2 + (4 if version == 2 else 0) + 4 + 1
    for g in range(attr_count):
        if end - pos < per_group:
            raise InLongMsgError(f"group {g} at offset {pos}: truncated (container declares {attr_count} groups)")
        (alen,) = _U16.unpack_from(buf, pos)
        pos += 2
        if end - pos < alen + per_group - 2:
            raise InLongMsgError(f"group {g} at offset {pos - 2}: attribute of {alen} bytes runs past the end")
        attr = decode_mutf8(bytes(buf[pos : pos + alen]), pos - 2)
        pos += alen
        cnt = 0
        if version == 2:
            (cnt,) = _unpack_i32(buf, pos)
            pos += 4
        (dlen,) = _unpack_i32(buf, pos)
        pos += 4
        if dlen < 1 or dlen > end - pos:
            raise InLongMsgError(
                f"group {g} ({attr!r}) at offset {pos - 4}: data length {dlen} but {end - pos} bytes are left"
            )
        flag = buf[pos]
        start = pos + 1
        pos += dlen
        if flag == 1:
            data = snappy_uncompress(buf, start, pos)
            groups.append((attr, cnt, data, 0, len(data)))
        else:
            groups.append((attr, cnt, buf, start, pos))
    if pos != end:
        raise InLongMsgError(f"v{version} container: {end - pos} stray bytes after group {attr_count - 1}")
    return version, create_time, msg_count, groups


def decode_default(buf: Any) -> tuple[int, int, int, int, dict[str, list[bytes]], dict[str, int]]:
    """A whole v0-v2 container: ``(version, create_time, msg_count, attr_count, bodies, attr_msg_counts)``.

    ``bodies`` maps each attr to its bodies in wire order of first appearance; a repeated attr replaces
    the earlier group's data but keeps its place, as Java's ``LinkedHashMap``.
    """
    version, create_time, msg_count, groups = read_groups(buf)
    if version == 3:
        raise InLongMsgError("a v3 container's groups hold records, not bodies")
    bodies: dict[str, list[bytes]] = {}
    counts: dict[str, int] = {}
    for attr, cnt, owner, start, stop in groups:
        bodies[attr] = split_items(owner, start, stop)
        counts[attr] = cnt
    return version, create_time, msg_count, len(groups), bodies, counts


# ---- builder core (v1-v3)


class BuilderBase:
    """Groups bodies by attr in first-add order and writes v1-v3 containers (the Java encoder)."""

    def __init__(self, version: int = 1, compress: bool = True, capacity: int = 4096) -> None:
        if version not in (1, 2, 3, 4):  # Java's v0 (and unknown) build returns null
            raise ValueError(f"InLongMsg version {version} cannot be built (1, 2, 3 or 4)")
        self.version = version
        self.compress = bool(compress)
        self.capacity = int(capacity)
        self._groups: dict[str, list[Any]] = {}
        self.msg_count = 0
        self._size = 4 + 4 + 8 + (4 if version == 2 else 0)

    @property
    def size_estimate(self) -> int:
        """The Java class's running size estimate (what ``capacity`` is compared with)."""
        return self._size

    def is_full(self) -> bool:
        """True once the size estimate reached ``capacity`` (Java's ``isfull``)."""
        return self._size >= self.capacity

    def __len__(self) -> int:
        return self.msg_count

    def add(self, attr: str, body: Any) -> bool:
        """Store ``body`` under ``attr``; False once the container is full (the body is stored anyway).

        For v3 ``body`` is a record ``([len][msg][len][private attr])+``, checked like Java's encoder.
        """
        version = self.version
        if version == 4:
            raise ValueError("a v4 container holds one binary message: use add_binary()")
        mv = memoryview(body)
        n = mv.nbytes
        added = 1
        if version == 3:
            try:
                items = _walk_items(mv, 0, n, None)
            except InLongMsgError as exc:
                raise ValueError(f"v3 record: {exc}") from None
            added = max(1, items // 2)
        group = self._groups.get(attr)
        if group is None:
            if len(encode_mutf8(attr)) > MAX_ATTR_BYTES:
                raise ValueError(f"attribute longer than {MAX_ATTR_BYTES} bytes in modified UTF-8")
            group = self._groups[attr] = [bytearray(), 0]
        payload: bytearray = group[0]
        payload += _I32.pack(n)
        payload += mv
        group[1] += 1
        self.msg_count += added
        self._size += java_length(attr) + 7 + n + 4 + (4 if version == 2 else 0)
        return self._size < self.capacity

    def build(self, create_time: int) -> bytes:
        version = self.version
        out = bytearray((MAGIC_BYTE, version))
        out += _I64.pack(create_time)
        if version >= 2:
            out += _I32.pack(self.msg_count)
        out += _I32.pack(len(self._groups))
        compress = self.compress
        for attr, (payload, cnt) in self._groups.items():
            raw = encode_mutf8(attr)
            out += _U16.pack(len(raw))
            out += raw
            if version == 2:
                out += _I32.pack(cnt)
            data = snappy_compress(payload) if compress else payload
            out += _I32.pack(len(data) + 1)
            out.append(1 if compress else 0)
            out += data
        out += bytes((MAGIC_BYTE, version))
        return bytes(out)
