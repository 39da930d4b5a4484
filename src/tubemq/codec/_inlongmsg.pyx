# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
# cython: embedsignature=True
"""Compiled InLongMsg (TDMsg) hot paths: the same contract as :mod:`tubemq.codec._inlongmsg_py`.

Header/group walking, body splitting and the v1-v3 encoder run as C loops over the input buffer;
bodies are ``bytes`` copies of input slices (one allocation each, no intermediate objects). Snappy
goes through ``cramjam`` like the twin; the rarely used pieces (modified UTF-8 outside ASCII, the
snappy import) are the twin's own functions.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_FromStringAndSize, PyByteArray_Resize
from cpython.bytearray cimport PyByteArray_GET_SIZE
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.dict cimport PyDict_GetItem
from cpython.list cimport PyList_Append
from cpython.object cimport PyObject
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcpy

from ..errors import InLongMsgError

from ._inlongmsg_py import (
    MAX_ATTR_BYTES,
    SNAPPY_EXTRA,
    SNAPPY_MAX_RATIO,
    _snappy_module,
    decode_mutf8,
    encode_mutf8,
    java_length,
)

implementation = "cython"

__all__ = [
    "BuilderBase", "MAX_ATTR_BYTES", "SNAPPY_EXTRA", "SNAPPY_MAX_RATIO", "container_version",
    "decode_default", "decode_mutf8", "encode_mutf8", "implementation", "java_length", "read_groups",
    "snappy_compress", "snappy_length", "snappy_uncompress", "split_items", "split_pairs",
]

cdef extern from "Python.h":
    object PyUnicode_DecodeASCII(const char* s, Py_ssize_t size, const char* errors)


cdef inline int32_t rd_i32(const uint8_t* p) noexcept nogil:
    return <int32_t>((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | <uint32_t>p[3])


cdef inline void wr_i32(uint8_t* p, int64_t v) noexcept nogil:
    cdef uint32_t u = <uint32_t>v
    p[0] = <uint8_t>(u >> 24)
    p[1] = <uint8_t>(u >> 16)
    p[2] = <uint8_t>(u >> 8)
    p[3] = <uint8_t>u


cdef class _View:
    """A read-only buffer acquired for the duration of one call."""
    cdef Py_buffer view
    cdef const uint8_t* p
    cdef Py_ssize_t n
    cdef bint held

    def __cinit__(self, object obj):
        PyObject_GetBuffer(obj, &self.view, PyBUF_SIMPLE)
        self.held = True
        self.p = <const uint8_t*>self.view.buf
        self.n = self.view.len

    def __dealloc__(self):
        if self.held:
            PyBuffer_Release(&self.view)


cdef Py_ssize_t _walk_items(const uint8_t* p, Py_ssize_t pos, Py_ssize_t end, list out) except -1:
    """``([int32 len][len bytes])*`` exactly filling ``p[pos:end]``: the number of items, each copied into
    ``out`` unless it is None (the decoder splits bodies with it; the builder checks a v3 record)."""
    cdef Py_ssize_t items = 0
    cdef int32_t n
    while pos < end:
        if end - pos < 4:
            raise InLongMsgError(f"item at offset {pos}: {end - pos} stray bytes where a 4-byte length belongs")
        n = rd_i32(p + pos)
        pos += 4
        if n < 0 or n > end - pos:
            raise InLongMsgError(f"item at offset {pos - 4}: length {n} but {end - pos} bytes are left")
        if out is not None:
            PyList_Append(out, PyBytes_FromStringAndSize(<const char*>(p + pos), n))
        pos += n
        items += 1
    return items


cdef list _split(const uint8_t* p, Py_ssize_t pos, Py_ssize_t end):
    cdef list out = []
    _walk_items(p, pos, end, out)
    return out


def split_items(object buf, Py_ssize_t start, Py_ssize_t end):
    """``([int32 len][len bytes])*`` exactly filling ``buf[start:end]`` -> the bodies (copies)."""
    cdef _View v = _View(buf)
    if start < 0 or end > v.n or start > end:
        raise ValueError(f"range [{start}, {end}) outside a buffer of {v.n} bytes")
    return _split(v.p, start, end)


def split_pairs(object buf, Py_ssize_t start, Py_ssize_t end):
    """``([int32 len][msg][int32 len][attr])*`` exactly filling ``buf[start:end]`` -> (msg, attr) pairs."""
    cdef list items = split_items(buf, start, end)
    cdef Py_ssize_t i, k = len(items)
    if k % 2:
        raise InLongMsgError(f"record at offset {start}: {k} items, not (message, attribute) pairs")
    for i in range(k):
        if not len(<bytes>items[i]):
            raise InLongMsgError(f"record at offset {start}: item {i} is empty (the Java decoder stops there)")
    return [(items[i], items[i + 1]) for i in range(0, k, 2)]


cdef Py_ssize_t _snappy_len(const uint8_t* p, Py_ssize_t start, Py_ssize_t end) except -1:
    cdef uint64_t value = 0
    cdef int shift = 0
    cdef Py_ssize_t pos = start
    cdef uint8_t b
    while True:
        if pos >= end or shift > 28:
            raise InLongMsgError(f"snappy block at offset {start}: bad length preamble")
        b = p[pos]
        pos += 1
        value |= (<uint64_t>(b & 0x7F)) << shift
        if not b & 0x80:
            break
        shift += 7
    if value > 0xFFFFFFFFu:
        raise InLongMsgError(f"snappy block at offset {start}: bad length preamble")
    if value > <uint64_t>(SNAPPY_MAX_RATIO * (end - start) + 16):
        raise InLongMsgError(
            f"snappy block at offset {start} ({end - start} bytes) claims {value} bytes uncompressed, "
            f"more than {SNAPPY_MAX_RATIO}x its size"
        )
    return <Py_ssize_t>value


def snappy_length(object buf, Py_ssize_t start, Py_ssize_t end):
    """The uncompressed length a raw snappy block declares (its varint preamble), bounds-checked."""
    cdef _View v = _View(buf)
    return _snappy_len(v.p, start, end)


cdef int _unsnappy(const uint8_t* src, Py_ssize_t n, uint8_t* dst, Py_ssize_t size) noexcept nogil:
    """Raw snappy block body (after the length preamble) into exactly ``size`` bytes: 0, or -1 if invalid."""
    cdef Py_ssize_t ip = 0, op = 0, ln, off, k
    cdef uint32_t tag, extra
    while ip < n:
        tag = src[ip]
        ip += 1
        if tag & 3 == 0:  # literal
            ln = tag >> 2
            if ln >= 60:
                extra = ln - 59
                if n - ip < extra:
                    return -1
                ln = 0
                for k in range(<Py_ssize_t>extra):
                    ln |= (<Py_ssize_t>src[ip + k]) << (8 * k)
                ip += extra
            ln += 1
            if ln > n - ip or ln > size - op:
                return -1
            memcpy(dst + op, src + ip, ln)
            ip += ln
            op += ln
            continue
        if tag & 3 == 1:
            if ip >= n:
                return -1
            ln = ((tag >> 2) & 7) + 4
            off = ((<Py_ssize_t>(tag >> 5)) << 8) | src[ip]
            ip += 1
        elif tag & 3 == 2:
            if n - ip < 2:
                return -1
            ln = (tag >> 2) + 1
            off = src[ip] | (<Py_ssize_t>src[ip + 1] << 8)
            ip += 2
        else:
            if n - ip < 4:
                return -1
            ln = (tag >> 2) + 1
            off = (<Py_ssize_t>src[ip] | (<Py_ssize_t>src[ip + 1] << 8) | (<Py_ssize_t>src[ip + 2] << 16)
                   | (<Py_ssize_t>src[ip + 3] << 24))
            ip += 4
        if off == 0 or off > op or ln > size - op:
            return -1
        if off >= ln:
            memcpy(dst + op, dst + op - off, ln)
        else:
            for k in range(ln):
                dst[op + k] = dst[op - off + k]
        op += ln
    return 0 if op == size else -1


cdef object _uncompress(object buf, const uint8_t* p, Py_ssize_t start, Py_ssize_t end):
    """The raw snappy block ``p[start:end]`` uncompressed (compiled decoder: no snappy package needed)."""
    cdef Py_ssize_t size = _snappy_len(p, start, end)
    cdef Py_ssize_t body = start
    while p[body] & 0x80:  # skip the length preamble (validated above)
        body += 1
    body += 1
    out = PyBytes_FromStringAndSize(NULL, size)
    cdef uint8_t* dst = <uint8_t*>PyBytes_AS_STRING(out)
    cdef int rc
    with nogil:
        rc = _unsnappy(p + body, end - body, dst, size)
    if rc != 0:
        raise InLongMsgError(f"snappy block at offset {start}: corrupt or truncated data")
    return out


def snappy_uncompress(object buf, Py_ssize_t start, Py_ssize_t end):
    """Uncompress the raw snappy block ``buf[start:end]`` into exactly its declared length."""
    cdef _View v = _View(buf)
    return _uncompress(buf, v.p, start, end)


def snappy_compress(object data):
    """One raw snappy block (not the framed format), as the Java class writes."""
    return bytes(_snappy_module().compress_raw(data))


cdef int _version(const uint8_t* p, Py_ssize_t n) except -1:
    if n < 4:
        raise InLongMsgError(f"not an InLongMsg container: {n} bytes, at least 4 needed")
    cdef uint8_t v = p[1]
    if p[0] != 0x0F or p[n - 2] != 0x0F or p[n - 1] != v or v > 4:
        raise InLongMsgError(
            f"not an InLongMsg container: magic {(<bytes>p[:2]).hex()} ... {(<bytes>p[n - 2:n]).hex()} "
            "(expected 0f0V ... 0f0V with V in 0-4)"
        )
    return v


def container_version(object buf):
    """The version both magics agree on (``getMagic``), or raise."""
    cdef _View v = _View(buf)
    return _version(v.p, v.n)


cdef inline str _attr(const uint8_t* p, Py_ssize_t pos, Py_ssize_t alen):
    cdef Py_ssize_t i
    for i in range(alen):
        if p[pos + i] == 0 or p[pos + i] >= 0x80:
            return decode_mutf8(PyBytes_FromStringAndSize(<const char*>(p + pos), alen), pos - 2)
    return PyUnicode_DecodeASCII(<const char*>(p + pos), alen, NULL)


cdef tuple _read_groups(object buf, _View v):
    cdef const uint8_t* p = v.p
    cdef Py_ssize_t n = v.n
    cdef int version = _version(p, n)
    if version == 4:
        raise InLongMsgError("a v4 container has no groups")
    cdef Py_ssize_t end = n - 2, pos = 2, need, per_group, alen, start
    cdef int64_t create_time = -1
    cdef int32_t msg_count = 0, attr_count, cnt, dlen
    cdef int g
    cdef list groups = []
    need = (8 if version >= 1 else 0) + (4 if version >= 2 else 0) + 4
    if end - pos < need:
        raise InLongMsgError(f"v{version} container of {n} bytes: header truncated")
    if version >= 1:
        create_time = (<int64_t>(<uint64_t>(<uint32_t>rd_i32(p + pos)) << 32)) | <uint32_t>rd_i32(p + pos + 4)
        pos += 8
    if version >= 2:
        msg_count = rd_i32(p + pos)
        pos += 4
        if msg_count < 0 and version == 3:  # v3 pre-sizes a map with it (Java throws)
            raise InLongMsgError(f"v{version} container: negative message count {msg_count}")
    attr_count = rd_i32(p + pos)
    pos += 4
    if attr_count < 0:
        raise InLongMsgError(f"v{version} container: negative attribute count {attr_count}")
    per_group = 2 + (4 if version == 2 else 0) + 4 + 1
    for g in range(attr_count):
        if end - pos < per_group:
            raise InLongMsgError(f"group {g} at offset {pos}: truncated (container declares {attr_count} groups)")
        alen = (<Py_ssize_t>p[pos] << 8) | p[pos + 1]
        pos += 2
        if end - pos < alen + per_group - 2:
            raise InLongMsgError(f"group {g} at offset {pos - 2}: attribute of {alen} bytes runs past the end")
        attr = _attr(p, pos, alen)
        pos += alen
        cnt = 0
        if version == 2:
            cnt = rd_i32(p + pos)
            pos += 4
        dlen = rd_i32(p + pos)
        pos += 4
        if dlen < 1 or dlen > end - pos:
            raise InLongMsgError(
                f"group {g} ({attr!r}) at offset {pos - 4}: data length {dlen} but {end - pos} bytes are left"
            )
        start = pos + 1
        pos += dlen
        if p[start - 1] == 1:
            data = _uncompress(buf, p, start, pos)
            groups.append((attr, cnt, data, 0, len(data)))
        else:
            groups.append((attr, cnt, buf, start, pos))
    if pos != end:
        raise InLongMsgError(f"v{version} container: {end - pos} stray bytes after group {attr_count - 1}")
    return version, create_time, msg_count, groups


def read_groups(object buf):
    """Header and groups of a v0-v3 container: ``(version, create_time, msg_count, groups)``.

    Each group is ``(attr, attr_msg_count, owner, start, end)``: its payload is ``owner[start:end]``.
    """
    cdef _View v = _View(buf)
    return _read_groups(buf, v)


def decode_default(object buf):
    """A whole v0-v2 container: ``(version, create_time, msg_count, attr_count, bodies, attr_msg_counts)``."""
    cdef _View v = _View(buf)
    cdef _View pv
    cdef tuple head = _read_groups(buf, v)
    cdef int version = head[0]
    if version == 3:
        raise InLongMsgError("a v3 container's groups hold records, not bodies")
    cdef dict bodies = {}, counts = {}
    cdef list groups = <list>head[3]
    cdef tuple g
    for g in groups:
        owner = g[2]
        if owner is buf:
            bodies[g[0]] = _split(v.p, g[3], g[4])
        else:
            pv = _View(owner)
            bodies[g[0]] = _split(pv.p, g[3], g[4])
        counts[g[0]] = g[1]
    return version, head[1], head[2], len(groups), bodies, counts


cdef class BuilderBase:
    """Groups bodies by attr in first-add order and writes v1-v3 containers (the Java encoder)."""

    cdef public int version
    cdef public bint compress
    cdef public Py_ssize_t capacity
    cdef public Py_ssize_t msg_count
    cdef Py_ssize_t _size
    cdef dict _groups    # attr -> index into _payloads / _counts
    cdef list _attrs
    cdef list _payloads  # bytearray per group: ([int32 len][body])*
    cdef list _counts
    cdef list _costs     # per group: Java's size estimate of one add minus the body length

    def __init__(self, int version=1, compress=True, capacity=4096):
        if version not in (1, 2, 3, 4):  # Java's v0 (and unknown) build returns null
            raise ValueError(f"InLongMsg version {version} cannot be built (1, 2, 3 or 4)")
        self.version = version
        self.compress = bool(compress)
        self.capacity = int(capacity)
        self._groups = {}
        self._attrs = []
        self._payloads = []
        self._counts = []
        self._costs = []
        self.msg_count = 0
        self._size = 4 + 4 + 8 + (4 if version == 2 else 0)

    @property
    def size_estimate(self):
        """The Java class's running size estimate (what ``capacity`` is compared with)."""
        return self._size

    def is_full(self):
        """True once the size estimate reached ``capacity`` (Java's ``isfull``)."""
        return self._size >= self.capacity

    def __len__(self):
        return self.msg_count

    def add(self, str attr, object body):
        """Store ``body`` under ``attr``; False once the container is full (the body is stored anyway)."""
        cdef int version = self.version
        if version == 4:
            raise ValueError("a v4 container holds one binary message: use add_binary()")
        cdef Py_buffer view
        PyObject_GetBuffer(body, &view, PyBUF_SIMPLE)
        try:
            return self._add(attr, <const uint8_t*>view.buf, view.len)
        finally:
            PyBuffer_Release(&view)

    cdef object _add(self, str attr, const uint8_t* p, Py_ssize_t n):
        cdef int version = self.version
        cdef Py_ssize_t items, old, gi
        cdef Py_ssize_t added = 1
        if version == 3:
            try:
                items = _walk_items(p, 0, n, None)
            except InLongMsgError as exc:
                raise ValueError(f"v3 record: {exc}") from None
            added = items // 2 if items >= 2 else 1
        cdef PyObject* hit = PyDict_GetItem(self._groups, attr)
        if hit == NULL:
            if len(encode_mutf8(attr)) > MAX_ATTR_BYTES:
                raise ValueError(f"attribute longer than {MAX_ATTR_BYTES} bytes in modified UTF-8")
            gi = len(self._attrs)
            self._groups[attr] = gi
            self._attrs.append(attr)
            self._payloads.append(bytearray())
            self._counts.append(0)
            self._costs.append(java_length(attr) + 7 + 4 + (4 if version == 2 else 0))
        else:
            gi = <object>hit
        payload = <bytearray>self._payloads[gi]
        old = PyByteArray_GET_SIZE(payload)
        PyByteArray_Resize(payload, old + 4 + n)
        cdef uint8_t* dst = <uint8_t*>PyByteArray_AS_STRING(payload) + old
        wr_i32(dst, n)
        memcpy(dst + 4, p, n)
        self._counts[gi] = <Py_ssize_t>self._counts[gi] + 1
        self.msg_count += added
        self._size += <Py_ssize_t>self._costs[gi] + n
        return self._size < self.capacity

    def build(self, int64_t create_time):
        """The v1-v3 container bytes."""
        cdef int version = self.version
        cdef list parts = []
        cdef bytearray out = bytearray(b"\x0f\x00")
        out[1] = version
        head = bytearray(16)
        cdef uint8_t* h = <uint8_t*>PyByteArray_AS_STRING(head)
        wr_i32(h, create_time >> 32)
        wr_i32(h + 4, create_time & 0xFFFFFFFF)
        cdef Py_ssize_t k = 8
        if version >= 2:
            wr_i32(h + k, self.msg_count)
            k += 4
        wr_i32(h + k, len(self._attrs))
        k += 4
        out += head[:k]
        cdef Py_ssize_t i
        cdef bytearray fixed = bytearray(9)
        cdef uint8_t* f = <uint8_t*>PyByteArray_AS_STRING(fixed)
        snappy = _snappy_module() if self.compress else None
        for i in range(len(self._attrs)):
            raw = encode_mutf8(self._attrs[i])
            out.append((len(raw) >> 8) & 0xFF)
            out.append(len(raw) & 0xFF)
            out += raw
            if version == 2:
                wr_i32(f, <Py_ssize_t>self._counts[i])
                out += fixed[:4]
            payload = self._payloads[i]
            data = snappy.compress_raw(payload) if snappy is not None else payload
            wr_i32(f, len(data) + 1)
            f[4] = 1 if snappy is not None else 0
            out += fixed[:5]
            out += data
        out.append(0x0F)
        out.append(version)
        return bytes(out)
