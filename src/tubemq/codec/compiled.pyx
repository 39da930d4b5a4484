# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
# cython: embedsignature=True
"""Compiled TubeMQ wire codec: the same contract as :mod:`tubemq.codec.python`, hand-written in C-level loops.

Sans-IO: bytes in, bytes and small objects out; no sockets, asyncio or threads. The hot paths (framing,
the send request, the send and getMessage responses, topicInfo parsing) never build protobuf objects:
they read and write the proto2 wire format directly, byte-identical to what protobuf produces.
The small NamedTuple result types are shared with the twin (one class per name in the whole process);
:class:`Message` is a cdef class with the twin's attributes.

Layout (as asyncpg keeps its C next to its ``.pyx``): the C helpers are in ``_c/*.h``; this file holds
the declarations, buffers and checksums, and includes one ``.pxi`` per topic: ``_codec_frame.pxi``
(framing), ``_codec_envelope.pxi`` (RPC envelopes), ``_codec_payload.pxi`` (attributes and payloads),
``_codec_meta.pxi`` (metadata strings), ``_codec_message.pxi`` (:class:`Message`) and
``_codec_send.pxi`` (the send / getMessage hot path). ``_text.py`` is compiled in with ``include``: the
twin imports the same source.
"""

from cpython.buffer cimport PyBUF_READ, PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.memoryview cimport PyMemoryView_FromMemory
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItem, PyDict_GetItemWithError, PyDict_SetItem
from cpython.exc cimport PyErr_Occurred
from cpython.long cimport PyLong_CheckExact
from cpython.list cimport PyList_Append, PyList_GET_ITEM, PyList_GET_SIZE, PyList_New, PyList_SET_ITEM
from cpython.long cimport PyLong_AsLongLongAndOverflow, PyLong_FromLongLong
from cpython.object cimport PyObject, PyTypeObject
from cpython.tuple cimport PyTuple_GET_ITEM
from libc.stdint cimport INT64_MAX, int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcmp, memcpy, memmove, memset

cimport cython

from ..errors import DecodeError, FrameError

# The constants, the result types and the functions off the hot path are the twin's own (one definition
# each); the functions below and in the included ``_codec_*.pxi`` files are the compiled hot paths.
from .python import (
    BEGIN_TOKEN,
    DEFAULT_BROKER_PORT,
    DEFAULT_MAX_FRAME_SIZE,
    DEFAULT_MAX_PARTITIONS,
    DEFAULT_MAX_TOTAL_PARTITIONS,
    BrokerInfo,
    GetMessageResult,
    Partition,
    RawMessage,
    Request,
    Response,
    SendResponse,
    SubscribeInfo,
    PartitionBudget,
    decode_attributes,
    ip_to_int,
    java_parse_long,
    message_repr,
    parse_broker_info,
    parse_partition,
    parse_subscribe_info,
    parse_topic_meta_info,
    topic_info_entry,
    INDEX_ENTRY_SIZE,
    MAX_BLOCK_SIZE,
    MAX_LIST_SIZE,
    META_STORE_INS_BASE,
    TOKEN_MSG_TIME,
    TOKEN_MSG_TYPE,
)

include "_wire.pxi"

cdef extern from "Python.h":
    const Py_ssize_t PY_SSIZE_T_MAX
    object PyUnicode_DecodeUTF8(const char* s, Py_ssize_t size, const char* errors)
    const char* PyUnicode_AsUTF8AndSize(object u, Py_ssize_t* size) except NULL
    int PyUnicode_KIND(object u)
    void* PyUnicode_DATA(object u)
    uint32_t PyUnicode_READ(int kind, void* data, Py_ssize_t index)
    Py_ssize_t PyUnicode_GET_LENGTH(object u)
    object PyUnicode_Substring(object u, Py_ssize_t start, Py_ssize_t end)
    bint PyUnicode_CheckExact(object o)
    bint PyUnicode_IS_ASCII(object o)
    bint PyDict_CheckExact(object o)
    void PyObject_GC_UnTrack(object o)
    void PyObject_GC_Track(object o)
    bint PyObject_GC_IsTracked(object o)
    int PyObject_GenericSetAttr(object o, object name, PyObject* value) except -1
    Py_ssize_t PyObject_LengthHint(object o, Py_ssize_t default) except -1
    bint PyTuple_CheckExact(object o)
    void Py_SET_SIZE(object o, Py_ssize_t size)
    void Py_DECREF(PyObject* o)
    void Py_INCREF(PyObject* o)


cdef extern from "_c/tq_crc32.h":
    void tq_crc_init()
    void tq_clmul_init()
    int tq_clmul_ok
    uint32_t tq_crc32(const unsigned char* p, Py_ssize_t n) nogil

cdef extern from "_c/tq_pbwire.h":
    int tq_varint_len(uint64_t v) nogil
    char* tq_put_varint(char* p, uint64_t v) nogil
    void tq_put_be32(char* p, uint32_t v) nogil
    uint32_t tq_get_be32(const unsigned char* p) nogil
    Py_ssize_t tq_get_varint(const unsigned char* b, Py_ssize_t pos, Py_ssize_t end, uint64_t* out) nogil
    ctypedef struct tq_field:
        uint64_t key  # (num << 3) | wt as on the wire: the K_* constants of _wire.pxi
        uint64_t num
        int wt
        uint64_t v
        const unsigned char* p
        Py_ssize_t n
    int tq_next(const unsigned char* b, Py_ssize_t* pos, Py_ssize_t end, tq_field* f) nogil
    int tq_next_wide(const unsigned char* b, Py_ssize_t* pos, Py_ssize_t end, tq_field* f) nogil

cdef extern from "_c/tq_tuples.h":
    object tq_nt_new(object cls, object fields)
    object tq_nt5(object cls, object a, object b, object c, object d, object e)
    object tq_nt6(object cls, object a, object b, object c, object d, object e, object f)
    object tq_nt7(object cls, object a, object b, object c, object d, object e, object f, object g)
    object tq_nt11(object cls, object a, object b, object c, object d, object e, object f, object g, object h,
                   object i, object j, object k)
    object tq_nt5_untracked(object cls, object a, object b, object c, object d, object e)
    object tq_nt7_untracked(object cls, object a, object b, object c, object d, object e, object f, object g)
    str tq_ascii_str(const unsigned char* s, Py_ssize_t n)
    object tq_nt_slow(object cls, object fields)
    int tq_nt_fast
    int tq_nt_fast_possible(object cls)
    dict tq_dict_presized(Py_ssize_t n)

cdef extern from "_c/tq_topicinfo.h":
    ctypedef struct tq_ti_item:
        int64_t bid
        int64_t parts
        int64_t stores
    Py_ssize_t tq_topic_info_scan(const unsigned char* s, Py_ssize_t n, Py_ssize_t* tlen, int64_t* size,
                                  tq_ti_item* items, Py_ssize_t cap) nogil

tq_crc_init()
tq_clmul_init()

implementation = "cython"

#: Alias kept for DESIGN.md's wording (`parse_topic_info -> list[TopicPartition]`).
TopicPartition = Partition


def _self_check_fast_tuples() -> bool:
    """Use the fast NamedTuple construction only where it is indistinguishable from ``cls(*fields)``."""
    global tq_nt_fast
    samples = [
        (Partition, (1, "h", 8123, "t", 10001)),
        (BrokerInfo, (1, "h", 8123)),
        (SubscribeInfo, ("c", "g", Partition(1, "h", 8123, "t", 0))),
        (Response, (1, 0, 2, b"x", "", "", 3)),
        (Request, (0, 1, 3, 2, None, b"x")),
        (SendResponse, (True, 200, "OK", 1, 2, 3, False)),
        (RawMessage, (1, 2, b"x", 0)),
        (GetMessageResult, (True, 200, "OK", [], 1, 2, False, 3, False, 4, 0)),
    ]
    if not all(tq_nt_fast_possible(cls) for cls, _ in samples):
        return False
    tq_nt_fast = 1
    try:
        for cls, fields in samples:
            a = tq_nt_new(cls, fields)
            b = cls(*fields)
            if type(a) is not cls or a != b or hash(a[:1]) != hash(b[:1]) or repr(a) != repr(b):
                raise ValueError(cls)
            if cls is not GetMessageResult and hash(a) != hash(b):
                raise ValueError(cls)
    except Exception:
        tq_nt_fast = 0
    return bool(tq_nt_fast)


_FAST_TUPLES = _self_check_fast_tuples()

cdef object _PARTITION = Partition  # read once per partition built: a C global, not a module lookup
cdef str _TYPE_KEY = TOKEN_MSG_TYPE
cdef str _TIME_KEY = TOKEN_MSG_TIME
cdef bytes _EMPTY = b""


# ----------------------------------------------------------------------------------------------------
# buffers and small conversions


cdef struct CBuf:
    const unsigned char* p
    Py_ssize_t n
    bint view  # True when `buf` holds a Py_buffer that must be released


cdef inline int _get(object obj, CBuf* b, Py_buffer* buf) except -1:
    """Borrow the bytes of any buffer; bytes objects skip the buffer protocol."""
    if PyBytes_CheckExact(obj):
        b.p = <const unsigned char*>PyBytes_AS_STRING(obj)
        b.n = PyBytes_GET_SIZE(obj)
        b.view = False
        return 0
    PyObject_GetBuffer(obj, buf, PyBUF_SIMPLE)
    b.p = <const unsigned char*>buf.buf
    b.n = buf.len
    b.view = True
    return 0


cdef inline void _release(CBuf* b, Py_buffer* buf) noexcept:
    if b.view:
        b.view = False
        PyBuffer_Release(buf)


cdef inline uint32_t _serial32(object serial) except? 0xFFFFFFFF:
    """``serial & 0xFFFFFFFF`` without Python arithmetic in the common case."""
    cdef int overflow = 0
    cdef long long v = PyLong_AsLongLongAndOverflow(serial, &overflow)
    if overflow:
        v = <long long>(serial & 0xFFFFFFFF)
    return <uint32_t>v


cdef inline const char* _utf8(object s, Py_ssize_t* n) except NULL:
    if not PyUnicode_CheckExact(s) and not isinstance(s, str):
        raise TypeError(f"expected str, got {type(s).__name__}")
    return PyUnicode_AsUTF8AndSize(s, n)


cdef inline str _dec(const unsigned char* p, Py_ssize_t n):
    return PyUnicode_DecodeUTF8(<const char*>p, n, "replace")


cdef enum:
    _MSG_CACHE_MAX = 24

cdef char _msg_cache_raw[_MSG_CACHE_MAX]
cdef Py_ssize_t _msg_cache_len = -1
cdef str _msg_cache_str = None


cdef inline str _dec_msg(const unsigned char* p, Py_ssize_t n):
    """errMsg text: the last short one is kept, so a repeated "OK!" is one memcmp, not a new str."""
    global _msg_cache_len, _msg_cache_str
    if n == _msg_cache_len and memcmp(_msg_cache_raw, p, n) == 0:
        return _msg_cache_str
    cdef str s = _dec(p, n)
    if n <= _MSG_CACHE_MAX:
        memcpy(_msg_cache_raw, p, n)
        _msg_cache_len = n
        _msg_cache_str = s
    return s


cdef inline int _flen(uint64_t v) noexcept nogil:
    """Size of a varint field with a 1-byte key."""
    return 1 + tq_varint_len(v)


cdef inline Py_ssize_t _blen(Py_ssize_t n) noexcept nogil:
    """Size of a LEN field with a 1-byte key."""
    return 1 + tq_varint_len(<uint64_t>n) + n


cdef inline char* _put_v(char* p, unsigned char key, uint64_t v) noexcept nogil:
    p[0] = <char>key
    return tq_put_varint(p + 1, v)


cdef inline char* _put_b(char* p, unsigned char key, const void* s, Py_ssize_t n) noexcept nogil:
    p[0] = <char>key
    p = tq_put_varint(p + 1, <uint64_t>n)
    if n:
        memcpy(p, s, n)
    return p + n


cdef inline char* _put_conn(char* p, unsigned char flag) noexcept nogil:
    """The delimited RpcConnHeader{flag} that opens every request and response payload."""
    p[0] = 2
    p[1] = <char>K_CONN_FLAG
    p[2] = <char>flag
    return p + 3


cdef inline int64_t _signed(uint64_t v) noexcept nogil:
    return <int64_t>v


cdef inline int32_t _signed32(uint64_t v) noexcept nogil:
    return <int32_t><uint32_t>v


# ----------------------------------------------------------------------------------------------------
# checksums and small helpers


cdef uint32_t c_crc32(const unsigned char* p, Py_ssize_t n) noexcept nogil:
    return tq_crc32(p, n) & 0x7FFFFFFF


try:
    from zlib import crc32 as _zlib_crc32
except ImportError:  # pragma: no cover - CPython builds without zlib
    _zlib_crc32 = None

# With PCLMULQDQ (x86-64 with GCC/Clang) the folding CRC beats zlib's at every size; without it the
# slice-by-16 table wins on small inputs (no call overhead) and zlib's kernels above about 1 KiB
# (the figures depend on the CPU and the zlib build).
cdef Py_ssize_t _ZLIB_MIN = PY_SSIZE_T_MAX if tq_clmul_ok else 1024


cdef uint32_t _crc(const unsigned char* p, Py_ssize_t n) except? 0xFFFFFFFF:
    """Masked CRC-32 of C memory: table-driven for small inputs, zlib's crc32 for large ones."""
    if n >= _ZLIB_MIN and _zlib_crc32 is not None:
        return <uint32_t>(_zlib_crc32(PyMemoryView_FromMemory(<char*>p, n, PyBUF_READ))) & 0x7FFFFFFF
    return tq_crc32(p, n) & 0x7FFFFFFF


def crc32(data) -> int:
    """Masked CRC-32 TubeMQ stores with every message (§4.6)."""
    cdef Py_buffer buf
    cdef CBuf b
    cdef uint32_t c
    if _zlib_crc32 is not None and PyBytes_CheckExact(data) and PyBytes_GET_SIZE(data) >= _ZLIB_MIN:
        return _zlib_crc32(data) & 0x7FFFFFFF
    _get(data, &b, &buf)
    try:
        c = _crc(b.p, b.n)
    finally:
        _release(&b, &buf)
    return c



# The attribute text rules and (replaced just below by a C loop) java_hash: one source with the twin.
include "_text.py"


def java_hash(str text) -> int:
    """Java ``String.hashCode`` over UTF-16 code units, int32 wrap-around (filter keys, §4.8)."""
    cdef int kind = PyUnicode_KIND(text)
    cdef void* data = PyUnicode_DATA(text)
    cdef Py_ssize_t i, n = PyUnicode_GET_LENGTH(text)
    cdef uint32_t h = 0
    cdef uint32_t c
    for i in range(n):
        c = PyUnicode_READ(kind, data, i)
        if c > 0xFFFF:
            c -= 0x10000
            h = 31 * h + (0xD800 + (c >> 10))
            h = 31 * h + (0xDC00 + (c & 0x3FF))
        else:
            h = 31 * h + c
    return <int32_t>h


include "_codec_frame.pxi"
include "_codec_envelope.pxi"
include "_codec_payload.pxi"
include "_codec_meta.pxi"
include "_codec_message.pxi"
include "_codec_send.pxi"
