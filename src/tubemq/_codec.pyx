# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
# cython: embedsignature=True
"""Compiled TubeMQ wire codec: the same contract as :mod:`tubemq._codec_py`, hand-written in C-level loops.

Sans-IO: bytes in, bytes and small objects out; no sockets, asyncio or threads. The hot paths (framing,
the send request, the send and getMessage responses, topicInfo parsing) never build protobuf objects:
they read and write the proto2 wire format directly, byte-identical to what protobuf produces.
The small NamedTuple result types are shared with the twin (one class per name in the whole process);
:class:`Message` is a cdef class with the twin's attributes.
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

from .errors import DecodeError, FrameError

# The constants, the result types and the functions off the hot path are the twin's own (one definition
# each); the functions below are the compiled hot paths.
from ._codec_py import (
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

cdef extern from *:
    """
    #include <string.h>
    static uint32_t tq_crc_table[16][256];
    static void tq_crc_init(void) {
        uint32_t i, c; int k, t;
        for (i = 0; i < 256; i++) {
            c = i;
            for (k = 0; k < 8; k++) c = (c & 1) ? (0xEDB88320u ^ (c >> 1)) : (c >> 1);
            tq_crc_table[0][i] = c;
        }
        for (i = 0; i < 256; i++) {
            c = tq_crc_table[0][i];
            for (t = 1; t < 16; t++) { c = tq_crc_table[0][c & 0xFF] ^ (c >> 8); tq_crc_table[t][i] = c; }
        }
    }
    static inline uint32_t tq_le32(const unsigned char *p) {
        return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
    }
    /* slice-by-16 CRC-32 (IEEE, zlib-compatible): 16 independent table loads per 16 bytes, about twice
       the speed of slice-by-8 on the ~100-byte payloads of typical messages; portable (no zlib, no
       CPU-specific instructions), so Windows and non-x86 wheels need nothing */
    #if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__)) \
        && !defined(TQ_NO_CLMUL)
    #include <immintrin.h>
    #define TQ_HAVE_CLMUL 1
    static int tq_clmul_ok = 0;  /* set at import when the CPU has PCLMULQDQ and SSE4.1 */
    /* CRC-32 by folding 16-byte lanes with carry-less multiplication (Intel's "Fast CRC Computation
       for Generic Polynomials Using PCLMULQDQ", the constants of the reflected IEEE polynomial, as in
       zlib-ng and Chromium's zlib). n >= 64 and a multiple of 16; crc and the result are the running
       (inverted) value. */
    __attribute__((target("pclmul,sse4.1")))
    static uint32_t tq_crc32_clmul(const unsigned char *p, Py_ssize_t n, uint32_t crc) {
        const __m128i k1k2 = _mm_set_epi64x(0x01c6e41596LL, 0x0154442bd4LL);
        const __m128i k3k4 = _mm_set_epi64x(0x00ccaa009eLL, 0x01751997d0LL);
        const __m128i k5k0 = _mm_set_epi64x(0, 0x0163cd6124LL);
        const __m128i poly = _mm_set_epi64x(0x01f7011641LL, 0x01db710641LL);
        const __m128i low32 = _mm_setr_epi32(~0, 0, ~0, 0);
        __m128i x1, x2, x3, x4, x5, x6, x7, x8;
        x1 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)p), _mm_cvtsi32_si128((int)crc));
        x2 = _mm_loadu_si128((const __m128i *)(p + 16));
        x3 = _mm_loadu_si128((const __m128i *)(p + 32));
        x4 = _mm_loadu_si128((const __m128i *)(p + 48));
        p += 64; n -= 64;
        while (n >= 64) {  /* four lanes in parallel */
            x5 = _mm_clmulepi64_si128(x1, k1k2, 0x00); x1 = _mm_clmulepi64_si128(x1, k1k2, 0x11);
            x6 = _mm_clmulepi64_si128(x2, k1k2, 0x00); x2 = _mm_clmulepi64_si128(x2, k1k2, 0x11);
            x7 = _mm_clmulepi64_si128(x3, k1k2, 0x00); x3 = _mm_clmulepi64_si128(x3, k1k2, 0x11);
            x8 = _mm_clmulepi64_si128(x4, k1k2, 0x00); x4 = _mm_clmulepi64_si128(x4, k1k2, 0x11);
            x1 = _mm_xor_si128(_mm_xor_si128(x1, x5), _mm_loadu_si128((const __m128i *)p));
            x2 = _mm_xor_si128(_mm_xor_si128(x2, x6), _mm_loadu_si128((const __m128i *)(p + 16)));
            x3 = _mm_xor_si128(_mm_xor_si128(x3, x7), _mm_loadu_si128((const __m128i *)(p + 32)));
            x4 = _mm_xor_si128(_mm_xor_si128(x4, x8), _mm_loadu_si128((const __m128i *)(p + 48)));
            p += 64; n -= 64;
        }
        /* four lanes into one */
        x5 = _mm_clmulepi64_si128(x1, k3k4, 0x00); x1 = _mm_clmulepi64_si128(x1, k3k4, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(x1, x2), x5);
        x5 = _mm_clmulepi64_si128(x1, k3k4, 0x00); x1 = _mm_clmulepi64_si128(x1, k3k4, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(x1, x3), x5);
        x5 = _mm_clmulepi64_si128(x1, k3k4, 0x00); x1 = _mm_clmulepi64_si128(x1, k3k4, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(x1, x4), x5);
        while (n >= 16) {  /* then 16 bytes at a time */
            x5 = _mm_clmulepi64_si128(x1, k3k4, 0x00); x1 = _mm_clmulepi64_si128(x1, k3k4, 0x11);
            x1 = _mm_xor_si128(_mm_xor_si128(x1, _mm_loadu_si128((const __m128i *)p)), x5);
            p += 16; n -= 16;
        }
        /* 128 -> 64 bits */
        x2 = _mm_clmulepi64_si128(x1, k3k4, 0x10);
        x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), x2);
        x2 = _mm_srli_si128(x1, 4);
        x1 = _mm_and_si128(x1, low32);
        x1 = _mm_xor_si128(_mm_clmulepi64_si128(x1, k5k0, 0x00), x2);
        /* Barrett reduction to 32 bits */
        x2 = _mm_and_si128(x1, low32);
        x2 = _mm_clmulepi64_si128(x2, poly, 0x10);
        x2 = _mm_and_si128(x2, low32);
        x2 = _mm_clmulepi64_si128(x2, poly, 0x00);
        x1 = _mm_xor_si128(x1, x2);
        return (uint32_t)_mm_extract_epi32(x1, 1);
    }
    static void tq_clmul_init(void) {
        __builtin_cpu_init();
        tq_clmul_ok = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
    }
    #else
    static int tq_clmul_ok = 0;
    static void tq_clmul_init(void) {}
    #endif
    static uint32_t tq_crc32(const unsigned char *p, Py_ssize_t n) {
        uint32_t crc = 0xFFFFFFFFu, a, b, c, d;
    #ifdef TQ_HAVE_CLMUL
        if (n >= 64 && tq_clmul_ok) {
            Py_ssize_t chunk = n & ~(Py_ssize_t)15;
            crc = tq_crc32_clmul(p, chunk, crc);
            p += chunk; n -= chunk;
        }
    #endif
        while (n >= 16) {
            a = tq_le32(p) ^ crc; b = tq_le32(p + 4); c = tq_le32(p + 8); d = tq_le32(p + 12);
            crc = tq_crc_table[15][a & 0xFF] ^ tq_crc_table[14][(a >> 8) & 0xFF] ^
                  tq_crc_table[13][(a >> 16) & 0xFF] ^ tq_crc_table[12][a >> 24] ^
                  tq_crc_table[11][b & 0xFF] ^ tq_crc_table[10][(b >> 8) & 0xFF] ^
                  tq_crc_table[9][(b >> 16) & 0xFF] ^ tq_crc_table[8][b >> 24] ^
                  tq_crc_table[7][c & 0xFF] ^ tq_crc_table[6][(c >> 8) & 0xFF] ^
                  tq_crc_table[5][(c >> 16) & 0xFF] ^ tq_crc_table[4][c >> 24] ^
                  tq_crc_table[3][d & 0xFF] ^ tq_crc_table[2][(d >> 8) & 0xFF] ^
                  tq_crc_table[1][(d >> 16) & 0xFF] ^ tq_crc_table[0][d >> 24];
            p += 16; n -= 16;
        }
        if (n >= 8) {
            a = tq_le32(p) ^ crc; b = tq_le32(p + 4);
            crc = tq_crc_table[7][a & 0xFF] ^ tq_crc_table[6][(a >> 8) & 0xFF] ^
                  tq_crc_table[5][(a >> 16) & 0xFF] ^ tq_crc_table[4][a >> 24] ^
                  tq_crc_table[3][b & 0xFF] ^ tq_crc_table[2][(b >> 8) & 0xFF] ^
                  tq_crc_table[1][(b >> 16) & 0xFF] ^ tq_crc_table[0][b >> 24];
            p += 8; n -= 8;
        }
        while (n-- > 0) crc = tq_crc_table[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
        return crc ^ 0xFFFFFFFFu;
    }
    static inline int tq_varint_len(uint64_t v) { int n = 1; while (v >= 0x80) { v >>= 7; n++; } return n; }
    static inline char *tq_put_varint(char *p, uint64_t v) {
        while (v >= 0x80) { *p++ = (char)((v & 0x7F) | 0x80); v >>= 7; }
        *p++ = (char)v;
        return p;
    }
    static inline void tq_put_be32(char *p, uint32_t v) {
        p[0] = (char)(v >> 24); p[1] = (char)(v >> 16); p[2] = (char)(v >> 8); p[3] = (char)v;
    }
    static inline uint32_t tq_get_be32(const unsigned char *p) {
        return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
    }
    /* A varint in the 10 readable bytes at p: its length (1 - 10), or -2 when a 10th byte is above 1.
       Unrolled and branchy on purpose: a branch-free 8-byte decode was measured slower here (the
       lengths in a stream repeat, so the branches are predicted, and they do not wait on the load). */
    #define TQ_VB(i) c = p[i]; r |= (c & 0x7F) << (7 * i); if (c < 0x80) { *out = r; return i + 1; }
    static inline Py_ssize_t tq_varint10(const unsigned char *p, uint64_t *out) {
        uint64_t r, c;
        c = p[0]; r = c & 0x7F; if (c < 0x80) { *out = r; return 1; }
        TQ_VB(1) TQ_VB(2) TQ_VB(3) TQ_VB(4) TQ_VB(5) TQ_VB(6) TQ_VB(7) TQ_VB(8)
        c = p[9];
        if (c > 1) return -2;  /* a 10th byte may carry only bit 63 */
        *out = r | (c << 63);
        return 10;
    }
    #undef TQ_VB
    #if defined(__GNUC__)
    #define TQ_NOINLINE static __attribute__((noinline))
    #else
    #define TQ_NOINLINE static
    #endif
    /* >= 0: new position; -1 truncated; -2 more than 64 bits (a 10th byte above 1, or an 11th byte).
       Unrolled without bounds checks when 10 bytes are left, a byte at a time near the end. Out of
       line: tq_next inlines its 1-byte cases and stays small enough to be inlined in the decoders
       (measured: inlining this too made getMessage decoding slower). */
    TQ_NOINLINE Py_ssize_t tq_get_varint(const unsigned char *b, Py_ssize_t pos, Py_ssize_t end, uint64_t *out) {
        uint64_t r = 0; int shift = 0; unsigned char c;
        Py_ssize_t len;
        if (end - pos >= 10) {
            len = tq_varint10(b + pos, out);
            return len < 0 ? len : pos + len;
        }
        for (;;) {
            if (pos >= end) return -1;
            c = b[pos++];
            if (shift == 63 && c > 1) return -2;  /* a 10th byte may carry only bit 63 */
            r |= (uint64_t)(c & 0x7F) << shift;
            if (!(c & 0x80)) { *out = r; return pos; }
            shift += 7;
        }
    }
    /* One protobuf field at *pos (proto2, unknown fields skipped by the callers). 1 read, 0 at the end,
       < 0 an error in the twin's order: -1 truncated varint, -2 varint over 64 bits, -3 truncated LEN,
       -4 truncated fixed64, -5 truncated fixed32, -6 unsupported wire type, -7 field number 0. */
    typedef struct { uint64_t key; uint64_t num; int wt; uint64_t v; const unsigned char *p; Py_ssize_t n; } tq_field;
    static inline int tq_next_(const unsigned char *b, Py_ssize_t *pos, Py_ssize_t end, tq_field *f, const int two) {
        Py_ssize_t q = *pos;
        uint64_t key, n;
        int i;
        if (q >= end) return 0;
        if (b[q] < 0x80) { key = b[q++]; }
        else { q = tq_get_varint(b, q, end, &key); if (q < 0) return (int)q; }
        f->key = key;
        f->num = key >> 3;
        f->wt = (int)(key & 7);
        switch (f->wt) {
        case 0:  /* 1-byte values inline, and 2-byte ones (error codes, offsets below 16 Ki) with `two` */
            if (q < end && b[q] < 0x80) { f->v = b[q++]; }
            else if (two && end - q >= 2 && b[q + 1] < 0x80) { f->v = (uint64_t)(b[q] & 0x7F) | ((uint64_t)b[q + 1] << 7); q += 2; }
            else { q = tq_get_varint(b, q, end, &f->v); if (q < 0) return (int)q; }
            break;
        case 2:
            if (q < end && b[q] < 0x80) { n = b[q++]; }
            else if (two && end - q >= 2 && b[q + 1] < 0x80) { n = (uint64_t)(b[q] & 0x7F) | ((uint64_t)b[q + 1] << 7); q += 2; }
            else { q = tq_get_varint(b, q, end, &n); if (q < 0) return (int)q; }
            if (n > (uint64_t)(end - q)) return -3;
            f->p = b + q;
            f->n = (Py_ssize_t)n;
            q += (Py_ssize_t)n;
            break;
        case 1:
            if (end - q < 8) return -4;
            f->v = 0;
            for (i = 0; i < 8; i++) f->v |= (uint64_t)b[q + i] << (8 * i);
            q += 8;
            break;
        case 5:
            if (end - q < 4) return -5;
            f->v = (uint64_t)b[q] | ((uint64_t)b[q + 1] << 8) | ((uint64_t)b[q + 2] << 16) | ((uint64_t)b[q + 3] << 24);
            q += 4;
            break;
        default:
            return -6;
        }
        if (f->num == 0) return -7;
        *pos = q;
        return 1;
    }
    /* the field readers: 2-byte varints inline (headers), or only 1-byte ones (TransferedMessage,
       whose message id and checksum are long: one test fewer per field) */
    #define tq_next(b, pos, end, f) tq_next_((b), (pos), (end), (f), 1)
    #define tq_next_wide(b, pos, end, f) tq_next_((b), (pos), (end), (f), 0)
    /* A NamedTuple instance without running its Python-level __new__. The fast form allocates the
       subtype instance and copies the items (what tuple_subtype_new does); it is switched on only after
       a start-up self-check proved it gives the same object as the documented tp_new path. */
    static int tq_nt_fast = 0;
    /* CPython versions whose tuple layout (no hash cache) and GC allocation this file relies on */
    #if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030E0000 && !defined(PYPY_VERSION) \
        && !defined(Py_LIMITED_API) && !defined(Py_GIL_DISABLED)
    #define TQ_GC_NEWVAR_OK 1
    #else
    #define TQ_GC_NEWVAR_OK 0
    #endif
    static PyObject *tq_nt_slow(PyObject *cls, PyObject *fields) {
        PyObject *args = PyTuple_Pack(1, fields), *r;
        if (args == NULL) return NULL;
        r = PyTuple_Type.tp_new((PyTypeObject *)cls, args, NULL);
        Py_DECREF(args);
        return r;
    }
    /* the instance straight from n borrowed items: one allocation, no argument tuple */
    static PyObject *tq_nt_items(PyObject *cls, Py_ssize_t n, PyObject **items) {
        Py_ssize_t i;
        PyObject *o, *t;
        if (!tq_nt_fast) {
            t = PyTuple_New(n);
            if (t == NULL) return NULL;
            for (i = 0; i < n; i++) { Py_INCREF(items[i]); PyTuple_SET_ITEM(t, i, items[i]); }
            o = tq_nt_slow(cls, t);
            Py_DECREF(t);
            return o;
        }
    #if TQ_GC_NEWVAR_OK
        /* tp_alloc (PyType_GenericAlloc) zero-fills and tracks; here every item is written before the
           collector can see the tuple, then it is tracked */
        o = (PyObject *)PyObject_GC_NewVar(PyVarObject, (PyTypeObject *)cls, n);
        if (o == NULL) return NULL;
        for (i = 0; i < n; i++) { Py_INCREF(items[i]); PyTuple_SET_ITEM(o, i, items[i]); }
        PyObject_GC_Track(o);
    #else
        o = ((PyTypeObject *)cls)->tp_alloc((PyTypeObject *)cls, n);
        if (o == NULL) return NULL;
        for (i = 0; i < n; i++) { Py_INCREF(items[i]); PyTuple_SET_ITEM(o, i, items[i]); }
    #endif
        return o;
    }
    static PyObject *tq_nt_new(PyObject *cls, PyObject *fields) {
        return tq_nt_items(cls, PyTuple_GET_SIZE(fields), &PyTuple_GET_ITEM(fields, 0));
    }
    static PyObject *tq_nt5(PyObject *cls, PyObject *a, PyObject *b, PyObject *c, PyObject *d, PyObject *e) {
        PyObject *it[5] = {a, b, c, d, e};
        return tq_nt_items(cls, 5, it);
    }
    static PyObject *tq_nt6(PyObject *cls, PyObject *a, PyObject *b, PyObject *c, PyObject *d, PyObject *e,
                            PyObject *f) {
        PyObject *it[6] = {a, b, c, d, e, f};
        return tq_nt_items(cls, 6, it);
    }
    static PyObject *tq_nt7(PyObject *cls, PyObject *a, PyObject *b, PyObject *c, PyObject *d, PyObject *e,
                            PyObject *f, PyObject *g) {
        PyObject *it[7] = {a, b, c, d, e, f, g};
        return tq_nt_items(cls, 7, it);
    }
    static PyObject *tq_nt11(PyObject *cls, PyObject *a, PyObject *b, PyObject *c, PyObject *d, PyObject *e,
                             PyObject *f, PyObject *g, PyObject *h, PyObject *i, PyObject *j, PyObject *k) {
        PyObject *it[11] = {a, b, c, d, e, f, g, h, i, j, k};
        return tq_nt_items(cls, 11, it);
    }
    /* A dict sized for n items up front (no rehash while it fills); plain PyDict_New where the
       CPython helper is not available. */
    static PyObject *tq_dict_presized(Py_ssize_t n) {
    #if PY_VERSION_HEX >= 0x030A0000 && PY_VERSION_HEX < 0x030E0000 && !defined(PYPY_VERSION) && !defined(Py_LIMITED_API)
        if (n > 5) return _PyDict_NewPresized(n);
    #endif
        return PyDict_New();
    }
    /* The same instance, never tracked by the collector: for tuples of str, int and bool only (such a
       tuple cannot be part of a cycle; CPython untracks a plain tuple of them at its next collection). Allocated without tp_alloc's zero-fill and
       tracking where the tuple layout is known (3.11 - 3.13, GIL builds); tracked-then-untracked elsewhere. */
    static PyObject *tq_nt_items_untracked(PyObject *cls, Py_ssize_t n, PyObject **items) {
        Py_ssize_t i;
        PyObject *o;
    #if TQ_GC_NEWVAR_OK
        if (tq_nt_fast) {
            o = (PyObject *)PyObject_GC_NewVar(PyVarObject, (PyTypeObject *)cls, n);
            if (o == NULL) return NULL;
            for (i = 0; i < n; i++) { Py_INCREF(items[i]); PyTuple_SET_ITEM(o, i, items[i]); }
            return o;
        }
    #endif
        o = tq_nt_items(cls, n, items);
        if (o != NULL) PyObject_GC_UnTrack(o);
        return o;
    }
    static PyObject *tq_nt5_untracked(PyObject *cls, PyObject *a, PyObject *b, PyObject *c, PyObject *d,
                                      PyObject *e) {
        PyObject *it[5] = {a, b, c, d, e};
        return tq_nt_items_untracked(cls, 5, it);
    }
    static PyObject *tq_nt7_untracked(PyObject *cls, PyObject *a, PyObject *b, PyObject *c, PyObject *d,
                                      PyObject *e, PyObject *f, PyObject *g) {
        PyObject *it[7] = {a, b, c, d, e, f, g};
        return tq_nt_items_untracked(cls, 7, it);
    }
    /* A str from ASCII bytes (what PyUnicode_Substring makes of an ASCII slice, without its checks) */
    static PyObject *tq_ascii_str(const unsigned char *s, Py_ssize_t n) {
        PyObject *u = PyUnicode_New(n, 127);
        if (u != NULL) memcpy(PyUnicode_DATA(u), s, (size_t)n);
        return u;
    }
    /* producer topicInfo items, scanned before anything is built */
    typedef struct { int64_t bid, parts, stores; } tq_ti_item;
    /* 1 - 18 plain digits at s[i] -> value and the index after them; -1 for anything else (the twin's).
       s is NUL-terminated (str data is), so the run stops at the end without a bounds check. */
    static inline Py_ssize_t tq_ti_digits(const unsigned char *s, Py_ssize_t i, int64_t *out) {
        Py_ssize_t j = i;
        uint64_t v = 0;
        unsigned d;
        while ((d = (unsigned)s[j] - 48u) <= 9u) { v = v * 10 + d; j++; }
        if (j == i || j - i > 18) return -1;
        *out = (int64_t)v;
        return j;
    }
    /* the same for a longer run (the max size): with 8 bytes readable (s[n] counts), a run of up to
       7 digits is read at once, without a branch per digit */
    static inline Py_ssize_t tq_ti_long_digits(const unsigned char *s, Py_ssize_t i, Py_ssize_t n, int64_t *out) {
    #if (defined(__GNUC__) || defined(__clang__)) && defined(__BYTE_ORDER__) \
        && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        if (n + 1 - i >= 8) {
            uint64_t x, a, nd;
            int len;
            memcpy(&x, s + i, 8);
            a = x ^ 0x3030303030303030ULL;  /* digit bytes become 0 - 9 */
            nd = ((a + 0x7676767676767676ULL) | a) & 0x8080808080808080ULL;  /* top bit: not a digit */
            if (nd) {
                len = __builtin_ctzll(nd) >> 3;
                if (len == 0) return -1;
                /* the digits right-aligned as if zero-padded to 8, then 8 digits in three steps */
                a <<= 8 * (8 - len);
                a = a * 10 + (a >> 8);
                a = (((a & 0x000000FF000000FFULL) * (100 + (1000000ULL << 32)))
                     + (((a >> 16) & 0x000000FF000000FFULL) * (1 + (10000ULL << 32)))) >> 32;
                *out = (int64_t)a;
                return i + len;
            }
        }
    #else
        (void)n;
    #endif
        return tq_ti_digits(s, i, out);
    }
    /* "topic#bid:parts:stores,...[#size[#...]]" in one pass over 1-byte chars: the item count
       (items[0 .. min(count, cap)) filled; call again with count entries when count > cap), or -1 when
       the text is not in the canonical form (the twin's parser decides). Empty items are skipped;
       after the size, anything from a third '#' on is ignored (what the twin does with split('#')).
       s[n] must be NUL (as in every str's data). */
    static Py_ssize_t tq_topic_info_scan(const unsigned char *s, Py_ssize_t n, Py_ssize_t *tlen, int64_t *size,
                                         tq_ti_item *items, Py_ssize_t cap) {
        const unsigned char *h = (const unsigned char *)memchr(s, '#', (size_t)n);
        Py_ssize_t i, j, count = 0;
        int64_t bid, parts, stores;
        if (h == NULL || h == s) return -1;
        *tlen = h - s;
        *size = -1;
        i = *tlen + 1;
        for (;;) {
            if (i >= n) return count;
            if (s[i] == ',') { i++; continue; }
            if (s[i] == '#') {
                i++;
                if (i < n && s[i] != '#') {
                    j = tq_ti_long_digits(s, i, n, size);
                    if (j < 0 || (j < n && s[j] != '#')) return -1;
                }
                return count;
            }
            j = tq_ti_digits(s, i, &bid);
            if (j < 0 || j >= n || s[j] != ':') return -1;
            j = tq_ti_digits(s, j + 1, &parts);
            if (j < 0 || j >= n || s[j] != ':') return -1;
            j = tq_ti_digits(s, j + 1, &stores);
            if (j < 0 || (j < n && s[j] != ',' && s[j] != '#')) return -1;
            if (count < cap) { items[count].bid = bid; items[count].parts = parts; items[count].stores = stores; }
            count++;
            i = j;
        }
    }
    static int tq_nt_fast_possible(PyObject *cls) {
        PyTypeObject *t = (PyTypeObject *)cls;
        return PyType_Check(cls) && PyType_IsSubtype(t, &PyTuple_Type) && t->tp_alloc == PyType_GenericAlloc
            && t->tp_dictoffset == 0 && t->tp_itemsize == (Py_ssize_t)sizeof(PyObject *);
    }
    """
    void tq_crc_init()
    void tq_clmul_init()
    int tq_clmul_ok
    uint32_t tq_crc32(const unsigned char* p, Py_ssize_t n) nogil
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
    object tq_nt_new(object cls, object fields)
    object tq_nt5(object cls, object a, object b, object c, object d, object e)
    object tq_nt6(object cls, object a, object b, object c, object d, object e, object f)
    object tq_nt7(object cls, object a, object b, object c, object d, object e, object f, object g)
    object tq_nt11(object cls, object a, object b, object c, object d, object e, object f, object g, object h,
                   object i, object j, object k)
    object tq_nt5_untracked(object cls, object a, object b, object c, object d, object e)
    object tq_nt7_untracked(object cls, object a, object b, object c, object d, object e, object f, object g)
    str tq_ascii_str(const unsigned char* s, Py_ssize_t n)
    ctypedef struct tq_ti_item:
        int64_t bid
        int64_t parts
        int64_t stores
    Py_ssize_t tq_topic_info_scan(const unsigned char* s, Py_ssize_t n, Py_ssize_t* tlen, int64_t* size,
                                  tq_ti_item* items, Py_ssize_t cap) nogil
    object tq_nt_slow(object cls, object fields)
    int tq_nt_fast
    int tq_nt_fast_possible(object cls)
    dict tq_dict_presized(Py_ssize_t n)

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

# With PCLMULQDQ (x86-64 with GCC/Clang) the folding CRC beats zlib's at every size (about 0.1 ns/byte
# against 0.5); without it the slice-by-16 table wins below about 1 KiB (no call overhead) and zlib's
# kernels above (measured on the reference VM, zlib 1.2.13).
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


# ----------------------------------------------------------------------------------------------------
# framing (§1)


cdef inline Py_ssize_t _nblocks(Py_ssize_t n) noexcept nogil:
    return 1 if n == 0 else (n + C_BLOCK - 1) // C_BLOCK


cdef inline char* _frame_header(char* p, uint32_t serial, Py_ssize_t blocks) noexcept nogil:
    tq_put_be32(p, C_BEGIN_TOKEN)
    tq_put_be32(p + 4, serial)
    tq_put_be32(p + 8, <uint32_t>blocks)
    return p + 12


cdef bytes c_encode_frame(uint32_t serial, const char* payload, Py_ssize_t n):
    """One allocation: token + serial + block count, then (length, ≤8192 bytes) blocks."""
    cdef Py_ssize_t blocks = _nblocks(n)
    cdef bytes out = PyBytes_FromStringAndSize(NULL, 12 + 4 * blocks + n)
    cdef char* p = _frame_header(PyBytes_AS_STRING(out), serial, blocks)
    cdef Py_ssize_t chunk
    if n == 0:
        tq_put_be32(p, 0)
        return out
    while n > 0:
        chunk = C_BLOCK if n > C_BLOCK else n
        tq_put_be32(p, <uint32_t>chunk)
        memcpy(p + 4, payload, chunk)
        p += 4 + chunk
        payload += chunk
        n -= chunk
    return out


cdef inline bytes _new_frame(uint32_t serial, Py_ssize_t plen, char** payload):
    """Allocate a whole frame; the caller writes the payload contiguously at ``payload[0]``."""
    cdef Py_ssize_t blocks = _nblocks(plen)
    cdef bytes out = PyBytes_FromStringAndSize(NULL, 12 + 4 * blocks + plen)
    cdef char* p = _frame_header(PyBytes_AS_STRING(out), serial, blocks)
    payload[0] = p + 4 * blocks
    return out


cdef inline void _spread_blocks(bytes frame, Py_ssize_t plen) noexcept:
    """Turn the contiguous payload written by ``_new_frame`` into length-prefixed blocks, in place.

    Block i moves back by 4*(blocks-1-i) bytes; moving in order never overwrites unread data.
    """
    cdef Py_ssize_t blocks = _nblocks(plen)
    cdef char* base = PyBytes_AS_STRING(frame)
    cdef char* src = base + 12 + 4 * blocks
    cdef char* dst = base + 12
    cdef Py_ssize_t i, chunk, left = plen
    if blocks == 1:
        tq_put_be32(dst, <uint32_t>plen)
        return
    for i in range(blocks):
        chunk = C_BLOCK if left > C_BLOCK else left
        tq_put_be32(dst, <uint32_t>chunk)
        memmove(dst + 4, src + i * C_BLOCK, chunk)
        dst += 4 + chunk
        left -= chunk


def encode_frame(serial, payload) -> bytes:
    """Frame ``payload`` as token + serial + block list, Java layout (8192-byte blocks)."""
    cdef uint32_t s = _serial32(serial)
    cdef Py_buffer buf
    cdef CBuf b
    if PyBytes_CheckExact(payload):
        return c_encode_frame(s, PyBytes_AS_STRING(payload), PyBytes_GET_SIZE(payload))
    _get(payload, &b, &buf)
    try:
        return c_encode_frame(s, <const char*>b.p, b.n)
    finally:
        _release(&b, &buf)


cdef Py_ssize_t _PRESIZE_MAX = 1024 * 1024  # largest result presized from a header's block count
# Largest unused tail of an assembled result that is kept (the size shrunk in place) instead of
# given back with a realloc: the presize from 8 KiB blocks overshoots by less than one block + the pad.
cdef Py_ssize_t _SLACK_KEPT = 16 * 1024
# Added to a presize from the block count. Without it the result's malloc chunk is a multiple of 4 KiB
# plus a fixed header, so the next heap chunk (typically the copy of the response body cut from the
# result) starts 1 - 31 bytes past the source modulo 4 KiB: glibc's ``rep movsb`` memcpy is ~10x slower
# for that distance on the AMD EPYC it was measured on (490 KB: 165 us instead of 16 us).
cdef Py_ssize_t _PRESIZE_PAD = 2048


cdef extern from "Python.h":
    int _PyBytes_Resize(PyObject** bytes, Py_ssize_t newsize) except -1


cdef class FrameDecoder:
    """Streaming frame decoder: feed bytes cut anywhere, get ``(serial, payload)`` tuples back.

    Raises :class:`FrameError` on a bad begin token, a zero or oversized block count, or a frame
    above ``max_frame_size``; after that every call raises again (the stream is unusable).
    Complete frames are copied straight from the fed buffer; a frame cut across reads has its blocks
    copied once, straight into the result ``bytes`` (sized from the header's block count, at most
    ``_PRESIZE_MAX``, grown if the blocks are larger), so at most ``12 + max_frame_size`` bytes are held.
    """

    def __cinit__(self):
        self._pay = None
        self._pcap = 0
        self._hlen = 0
        self._phase = 0
        self._left = 0
        self._error = None
        self._reset_scan()

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE, max_blocks: int = MAX_LIST_SIZE) -> None:
        if max_frame_size <= 0 or max_blocks <= 0:
            raise ValueError("max_frame_size and max_blocks must be positive")
        self.max_frame_size = max_frame_size
        self.max_blocks = max_blocks

    @property
    def failed(self) -> bool:
        return self._error is not None

    @property
    def buffered(self) -> int:
        """Bytes held for the incomplete frame (bounded by ``12 + max_frame_size``)."""
        return self._hlen + self._total

    cdef void _reset_scan(self) noexcept:
        self._off = 0
        self._serial = 0
        self._blocks = 0
        self._done = 0
        self._total = 0

    cdef void _reset_assembly(self) noexcept:
        self._pay = None
        self._pcap = 0
        self._hlen = 0
        self._phase = 0
        self._left = 0

    cdef object _fail(self, str reason):
        self._error = reason
        self._reset_assembly()
        self._reset_scan()
        return FrameError(reason)

    cdef int _scan(self, const unsigned char* p, Py_ssize_t avail) noexcept:
        """Advance over the frame starting at ``p``: 1 complete, 0 needs more, <0 a framing error."""
        cdef uint32_t length
        if self._off == 0:
            if avail < 12:
                return 0
            if tq_get_be32(p) != C_BEGIN_TOKEN:
                return -1
            self._serial = tq_get_be32(p + 4)
            self._blocks = tq_get_be32(p + 8)
            if self._blocks == 0:
                return -2
            if self._blocks > <uint64_t>self.max_blocks:
                return -3
            self._off = 12
        while self._done < self._blocks:
            if avail - self._off < 4:
                return 0
            length = tq_get_be32(p + self._off)
            if <uint64_t>length > <uint64_t>(self.max_frame_size - self._total):
                return -4
            if avail - self._off - 4 < <Py_ssize_t>length:
                return 0
            self._off += 4 + length
            self._total += length
            self._done += 1
        return 1

    cdef int _room(self, Py_ssize_t need) except -1:
        """Make the result ``bytes`` hold ``need`` bytes: exact for one block, else sized once from the
        block count as Java's 8 KiB blocks (+ ``_PRESIZE_PAD``; trimmed at the end), grown (one copy)
        for larger blocks."""
        cdef Py_ssize_t cap, est
        cdef bytes nb
        if need <= self._pcap:
            return 0
        est = <Py_ssize_t>self._blocks * 8192 + _PRESIZE_PAD
        if est > _PRESIZE_MAX:
            est = _PRESIZE_MAX
        if est > self.max_frame_size:
            est = self.max_frame_size
        cap = self._pcap * 2 if self._pcap else (est if self._blocks > 1 else need)
        if cap > self.max_frame_size:
            cap = self.max_frame_size
        if cap < need:
            cap = need
        nb = PyBytes_FromStringAndSize(NULL, cap)
        if self._total:
            memcpy(PyBytes_AS_STRING(nb), PyBytes_AS_STRING(self._pay), self._total)
        self._pay = nb
        self._pcap = cap
        return 0

    cdef object _finish(self):
        """The (serial, payload) of the assembled frame; the payload trimmed in place to its size.

        A small unused tail (a presize from 8 KiB blocks is at most one block too large) stays
        allocated: the size is set in place. A realloc would hand glibc back a smaller chunk than the
        next frame of the same block count asks for, so the next one is mmapped again (its dynamic
        mmap threshold only rises to the size of a freed mmapped chunk): a fresh mmap, a page fault
        per 4 KiB and a munmap for every large frame, measured at ~10 % of a consumer's CPU.
        """
        cdef PyObject* o
        cdef object payload = self._pay
        cdef Py_ssize_t total = self._total
        cdef object serial = PyLong_FromLongLong(self._serial)
        cdef Py_ssize_t slack = self._pcap - total
        self._reset_assembly()  # first: a failed trim below leaves the decoder clean
        self._reset_scan()
        if total == 0:
            return (serial, b"")
        if 0 < slack <= _SLACK_KEPT:
            # ``payload`` is still only ours (never handed out): shrinking its size is what a
            # realloc-free _PyBytes_Resize would do; the terminating NUL every bytes carries moves too
            Py_SET_SIZE(payload, total)
            PyBytes_AS_STRING(payload)[total] = 0
        elif slack:
            o = <PyObject*>payload
            Py_INCREF(o)
            payload = None  # ``o`` is now the only reference, as _PyBytes_Resize requires
            _PyBytes_Resize(&o, total)
            payload = <object>o
            Py_DECREF(o)
        return (serial, payload)

    cdef Py_ssize_t _assemble(self, const unsigned char* p, Py_ssize_t pos, Py_ssize_t n, list out) except -1:
        """Take bytes of the frame cut across reads from ``p[pos:n]``; return where it ended (``n`` if
        it is still incomplete). Same checks, in the same order, as ``_scan``."""
        cdef Py_ssize_t take
        cdef uint32_t length
        while pos < n:
            if self._phase == 0:  # the 12-byte header
                take = min(12 - self._hlen, n - pos)
                memcpy(self._hdr + self._hlen, p + pos, take)
                self._hlen += take
                pos += take
                if self._hlen < 12:
                    return pos
                if tq_get_be32(self._hdr) != C_BEGIN_TOKEN:
                    raise self._fail(_frame_reason(self, -1, self._hdr))
                self._serial = tq_get_be32(self._hdr + 4)
                self._blocks = tq_get_be32(self._hdr + 8)
                if self._blocks == 0:
                    raise self._fail(_frame_reason(self, -2, self._hdr))
                if self._blocks > <uint64_t>self.max_blocks:
                    raise self._fail(_frame_reason(self, -3, self._hdr))
                self._hlen = 0
                self._phase = 1
            elif self._phase == 1:  # a block length
                take = min(4 - self._hlen, n - pos)
                memcpy(self._hdr + self._hlen, p + pos, take)
                self._hlen += take
                pos += take
                if self._hlen < 4:
                    return pos
                self._hlen = 0
                length = tq_get_be32(self._hdr)
                if <uint64_t>length > <uint64_t>(self.max_frame_size - self._total):
                    raise self._fail(_frame_reason(self, -4, self._hdr))
                self._room(self._total + length)
                self._left = length
                self._phase = 2
            if self._phase == 2:  # block bytes, straight into the result
                take = min(self._left, n - pos)
                if take:
                    memcpy(PyBytes_AS_STRING(self._pay) + self._total, p + pos, take)
                self._total += take
                self._left -= take
                pos += take
                if self._left:
                    return pos
                self._done += 1
                if self._done == self._blocks:
                    out.append(self._finish())
                    return pos
                self._phase = 1
        return pos

    cdef object _emit(self, const unsigned char* p):
        """The (serial, joined payload) of the complete, scanned frame at ``p``."""
        cdef bytes payload
        cdef char* d
        cdef Py_ssize_t off = 12, length
        cdef uint32_t i
        if self._blocks == 1:
            payload = PyBytes_FromStringAndSize(<const char*>p + 16, self._total)
        else:
            payload = PyBytes_FromStringAndSize(NULL, self._total)
            d = PyBytes_AS_STRING(payload)
            for i in range(self._blocks):
                length = tq_get_be32(p + off)
                memcpy(d, p + off + 4, length)
                d += length
                off += 4 + length
        return (PyLong_FromLongLong(self._serial), payload)

    def feed(self, data) -> list:
        """Consume ``data`` (any buffer); return the frames it completed, in order."""
        if self._error is not None:
            raise FrameError(f"decoder failed earlier: {self._error}")
        cdef Py_buffer buf
        cdef CBuf b
        cdef list out = []
        cdef Py_ssize_t pos = 0, n
        cdef int r
        _get(data, &b, &buf)
        try:
            n = b.n
            if self._phase or self._hlen:
                # finish the frame cut across reads
                pos = self._assemble(b.p, 0, n, out)
            while pos < n:
                r = self._scan(b.p + pos, n - pos)
                if r < 0:
                    raise self._fail(_frame_reason(self, r, b.p + pos))
                if r == 0:
                    # incomplete: start assembling it (re-read from its start; the checks repeat)
                    self._reset_scan()
                    pos = self._assemble(b.p, pos, n, out)
                    continue
                out.append(self._emit(b.p + pos))
                pos += self._off
                self._reset_scan()
            return out
        finally:
            _release(&b, &buf)


cdef str _frame_reason(FrameDecoder d, int code, const unsigned char* p):
    if code == -1:
        return f"bad begin token 0x{tq_get_be32(p):08x}"
    if code == -2:
        return "frame with an empty block list"
    if code == -3:
        return f"block count {d._blocks} over the limit {d.max_blocks}"
    return f"frame size over the limit {d.max_frame_size}"


# ----------------------------------------------------------------------------------------------------
# protobuf wire reading (proto2; unknown fields skipped)


ctypedef tq_field Field


cdef int _truncated(Py_ssize_t r) except -1:
    if r == -1:
        raise DecodeError("truncated varint")
    raise DecodeError("varint longer than 64 bits")


cdef int _field_error(int r, Field* f) except -1:
    if r >= -2:
        _truncated(r)
    if r == -3:
        raise DecodeError("truncated length-delimited field")
    if r == -4:
        raise DecodeError("truncated fixed64")
    if r == -5:
        raise DecodeError("truncated fixed32")
    if r == -6:
        raise DecodeError(f"unsupported wire type {f.wt}")
    raise DecodeError("field number 0")


cdef inline int _next(const unsigned char* b, Py_ssize_t* pos, Py_ssize_t end, Field* f) except -1:
    """Read one field at ``pos[0]``: 1 when read, 0 at the end; DecodeError like the twin."""
    cdef int r = tq_next(b, pos, end, f)
    if r >= 0:
        return r
    return _field_error(r, f)


cdef inline int _next_wide(const unsigned char* b, Py_ssize_t* pos, Py_ssize_t end, Field* f) except -1:
    """``_next`` for messages whose multi-byte varints are mostly long (ids, checksums)."""
    cdef int r = tq_next_wide(b, pos, end, f)
    if r >= 0:
        return r
    return _field_error(r, f)


cdef inline int _delimited(const unsigned char* b, Py_ssize_t* pos, Py_ssize_t end,
                           const unsigned char** out, Py_ssize_t* n) except -1:
    cdef uint64_t ln = 0
    cdef Py_ssize_t q = tq_get_varint(b, pos[0], end, &ln)
    if q < 0:
        _truncated(q)
    if ln > <uint64_t>(end - q):
        raise DecodeError("truncated delimited message")
    out[0] = b + q
    n[0] = <Py_ssize_t>ln
    pos[0] = q + <Py_ssize_t>ln
    return 0


# ----------------------------------------------------------------------------------------------------
# envelope (§2)


cdef inline int64_t _i64(object v) except? -1:
    return v


def encode_request(serial, service_type, method, body, *, timeout_ms, protocol_ver=3) -> bytes:
    """A whole request frame: RpcConnHeader{flag 0} + RequestHeader + RequestBody(method, timeout, body)."""
    if timeout_ms is None or timeout_ms <= 0:
        raise ValueError("timeout_ms must be positive: the server never answers a request without it")
    cdef uint32_t s = _serial32(serial)
    cdef uint64_t st = <uint64_t>_i64(service_type), pv = <uint64_t>_i64(protocol_ver)
    cdef uint64_t m = <uint64_t>_i64(method), t = <uint64_t>_i64(timeout_ms)
    cdef Py_buffer buf
    cdef CBuf b
    cdef Py_ssize_t hlen, rlen, plen
    cdef char* p
    cdef bytes frame
    _get(body, &b, &buf)
    try:
        hlen = _flen(st) + _flen(pv)
        rlen = _flen(m) + _flen(t) + _blen(b.n)
        plen = 3 + tq_varint_len(hlen) + hlen + tq_varint_len(rlen) + rlen
        frame = _new_frame(s, plen, &p)
        p = _put_conn(p, C_RPC_FLAG_REQUEST)
        p = tq_put_varint(p, hlen)
        p = _put_v(p, K_REQ_HDR_SERVICE_TYPE, st)
        p = _put_v(p, K_REQ_HDR_PROTOCOL_VER, pv)
        p = tq_put_varint(p, rlen)
        p = _put_v(p, K_REQ_BODY_METHOD, m)
        p = _put_v(p, K_REQ_BODY_TIMEOUT, t)
        _put_b(p, K_REQ_BODY_REQUEST, b.p, b.n)
        _spread_blocks(frame, plen)
        return frame
    finally:
        _release(&b, &buf)


def decode_request(payload) -> Request:
    """Server side: the three delimited messages of a request (trailing bytes ignored, §1.4)."""
    cdef Py_buffer buf
    cdef CBuf b
    cdef Py_ssize_t pos = 0, cn, hn, bn, q
    cdef const unsigned char* conn
    cdef const unsigned char* header
    cdef const unsigned char* body
    cdef Field f
    cdef bint has_flag = False, has_method = False, has_timeout = False
    cdef int32_t flag = 0, st = -1, pv = -1, method = 0
    cdef int64_t timeout = 0
    cdef object req = _EMPTY
    _get(payload, &b, &buf)
    try:
        _delimited(b.p, &pos, b.n, &conn, &cn)
        _delimited(b.p, &pos, b.n, &header, &hn)
        _delimited(b.p, &pos, b.n, &body, &bn)
        q = 0
        while _next(conn, &q, cn, &f):
            if f.num == CONN_FLAG and f.wt == WT_VARINT:
                flag = _signed32(f.v)
                has_flag = True
        if not has_flag:
            raise DecodeError("RpcConnHeader: Message missing required fields: flag")
        q = 0
        while _next(header, &q, hn, &f):
            if f.num == REQ_HDR_SERVICE_TYPE and f.wt == WT_VARINT:
                st = _signed32(f.v)
            elif f.num == REQ_HDR_PROTOCOL_VER and f.wt == WT_VARINT:
                pv = _signed32(f.v)
        q = 0
        while _next(body, &q, bn, &f):
            if f.num == REQ_BODY_METHOD and f.wt == WT_VARINT:
                method = _signed32(f.v)
                has_method = True
            elif f.num == REQ_BODY_TIMEOUT and f.wt == WT_VARINT:
                timeout = _signed(f.v)
                has_timeout = True
            elif f.num == REQ_BODY_REQUEST and f.wt == WT_LEN:
                req = PyBytes_FromStringAndSize(<const char*>f.p, f.n)
        if not has_method:
            raise DecodeError("RequestBody: Message missing required fields: method")
        return tq_nt6(Request, flag, st, pv, method, timeout if has_timeout else None, req)
    finally:
        _release(&b, &buf)


def encode_response(serial, method, body, *, protocol_ver=3) -> bytes:
    """Server side: a success response frame (flag 1, status SUCCESS, protocolVer 3)."""
    cdef uint32_t s = _serial32(serial)
    cdef uint64_t m = <uint64_t>_i64(method), pv = <uint64_t>_i64(protocol_ver)
    cdef Py_buffer buf
    cdef CBuf b
    cdef Py_ssize_t hlen, rlen, plen
    cdef char* p
    cdef bytes frame
    _get(body, &b, &buf)
    try:
        hlen = _flen(C_STATUS_SUCCESS) + _flen(pv)
        rlen = _flen(m) + _blen(b.n)
        plen = 3 + tq_varint_len(hlen) + hlen + tq_varint_len(rlen) + rlen
        frame = _new_frame(s, plen, &p)
        p = _put_conn(p, C_RPC_FLAG_RESPONSE)
        p = tq_put_varint(p, hlen)
        p = _put_v(p, K_RSP_HDR_STATUS, C_STATUS_SUCCESS)
        p = _put_v(p, K_RSP_HDR_PROTOCOL_VER, pv)
        p = tq_put_varint(p, rlen)
        p = _put_v(p, K_RSP_BODY_METHOD, m)
        _put_b(p, K_RSP_BODY_DATA, b.p, b.n)
        _spread_blocks(frame, plen)
        return frame
    finally:
        _release(&b, &buf)


def encode_error_response(serial, str exception_name, str message, *, status=1, protocol_ver=3) -> bytes:
    """Server side: ERROR (status + protocolVer) or FATAL (status only) with an RspExceptionBody."""
    cdef uint32_t s = _serial32(serial)
    cdef uint64_t st = <uint64_t>_i64(status), pv = 0
    cdef Py_ssize_t nn, mn, hlen, elen, plen
    cdef const char* name = _utf8(exception_name, &nn)
    cdef const char* msg = _utf8(message, &mn)
    cdef char* p
    cdef bytes frame
    hlen = _flen(st)
    if protocol_ver is not None:
        pv = <uint64_t>_i64(protocol_ver)
        hlen += _flen(pv)
    elen = _blen(nn) + _blen(mn)
    plen = 3 + tq_varint_len(hlen) + hlen + tq_varint_len(elen) + elen
    frame = _new_frame(s, plen, &p)
    p = _put_conn(p, C_RPC_FLAG_RESPONSE)
    p = tq_put_varint(p, hlen)
    p = _put_v(p, K_RSP_HDR_STATUS, st)
    if protocol_ver is not None:
        p = _put_v(p, K_RSP_HDR_PROTOCOL_VER, pv)
    p = tq_put_varint(p, elen)
    p = _put_b(p, K_RSP_EXC_NAME, name, nn)
    _put_b(p, K_RSP_EXC_MESSAGE, msg, mn)
    _spread_blocks(frame, plen)
    return frame


def decode_response(payload) -> Response:
    """Client side: the three delimited messages of a response (trailing bytes ignored)."""
    cdef Py_buffer buf
    cdef CBuf b
    cdef Py_ssize_t pos = 0, cn, hn, bn, q
    cdef const unsigned char* conn
    cdef const unsigned char* header
    cdef const unsigned char* body
    cdef Field f
    cdef bint has_status = False, has_method = False
    cdef int32_t flag = 0, status = 0, pv = -1, method = 0
    cdef object data = None, name = None, message = ""
    _get(payload, &b, &buf)
    try:
        _delimited(b.p, &pos, b.n, &conn, &cn)
        _delimited(b.p, &pos, b.n, &header, &hn)
        _delimited(b.p, &pos, b.n, &body, &bn)
        q = 0
        while _next(conn, &q, cn, &f):
            if f.num == CONN_FLAG and f.wt == WT_VARINT:
                flag = _signed32(f.v)
        q = 0
        while _next(header, &q, hn, &f):
            if f.num == RSP_HDR_STATUS and f.wt == WT_VARINT:
                status = _signed32(f.v)
                has_status = True
            elif f.num == RSP_HDR_PROTOCOL_VER and f.wt == WT_VARINT:
                pv = _signed32(f.v)
        if not has_status:
            raise DecodeError("ResponseHeader without status")
        q = 0
        if status == C_STATUS_SUCCESS:
            while _next(body, &q, bn, &f):
                if f.num == RSP_BODY_METHOD and f.wt == WT_VARINT:
                    method = _signed32(f.v)
                    has_method = True
                elif f.num == RSP_BODY_DATA and f.wt == WT_LEN:
                    data = PyBytes_FromStringAndSize(<const char*>f.p, f.n)
            if not has_method or data is None:
                raise DecodeError("RspResponseBody: Message missing required fields")
            return tq_nt7(Response, flag, status, method, data, "", "", pv)
        while _next(body, &q, bn, &f):
            if f.num == RSP_EXC_NAME and f.wt == WT_LEN:
                name = _dec(f.p, f.n)
            elif f.num == RSP_EXC_MESSAGE and f.wt == WT_LEN:
                message = _dec(f.p, f.n)
        if name is None:
            raise DecodeError("RspExceptionBody: Message missing required fields: exceptionName")
        return tq_nt7(Response, flag, status, -1, _EMPTY, name, message, pv)
    finally:
        _release(&b, &buf)


# ----------------------------------------------------------------------------------------------------
# attributes and payloads (§4.6, §4.7)


def encode_attributes(attributes) -> str:
    """``k=v`` items joined with ``,``; keys/values must not contain ``,`` or ``=``."""
    if not attributes:
        return ""
    items = []
    for k, v in attributes.items():
        k = str(k)
        v = "" if v is None else str(v)
        if not k or "," in k or "=" in k or "," in v or "=" in v:
            raise ValueError(f"attribute {k!r}={v!r}: keys and values must be non-empty keys without ',' or '='")
        items.append(f"{k}={v}")
    return ",".join(items)


cdef inline str _attr_key(const unsigned char* p, Py_ssize_t n):
    """The system keys come back as the shared constants (no decode); others are decoded."""
    if n == 9 and p[0] == 36 and p[8] == 36:  # '$...$'
        if memcmp(p, b"$msgType$", 9) == 0:
            return _TYPE_KEY
        if memcmp(p, b"$msgTime$", 9) == 0:
            return _TIME_KEY
    return _dec(p, n)


cdef dict _attrs_utf8(const unsigned char* p, Py_ssize_t n):
    """decode_attributes over UTF-8 bytes (``,`` and ``=`` never occur inside a multi-byte sequence)."""
    cdef dict result = {}
    cdef Py_ssize_t i = 0, j, e, e2
    while i < n:
        j = i
        while j < n and p[j] != 44:  # ','
            j += 1
        if j > i:
            e = i
            while e < j and p[e] != 61:  # '='
                e += 1
            if e < j and e > i:
                e2 = e + 1
                while e2 < j and p[e2] != 61:
                    e2 += 1
                PyDict_SetItem(result, _attr_key(p + i, e - i), _dec(p + e + 1, e2 - e - 1))
        i = j + 1
    return result


def put_system_header(previous, msg_type, msg_time) -> str:
    """``Message.putSystemHeader``: ``$msgType$``/``$msgTime$`` first, then old non-system items."""
    items = []
    if msg_type and msg_type.strip():
        items.append(f"{TOKEN_MSG_TYPE}={msg_type.strip()}")
    if msg_time and msg_time.strip():
        items.append(f"{TOKEN_MSG_TIME}={msg_time.strip()}")
    if previous:
        for item in previous.split(","):
            if item and TOKEN_MSG_TYPE not in item and TOKEN_MSG_TIME not in item:
                items.append(item)
    return ",".join(items)


cdef inline str _attr_text(object attributes):
    if attributes is None:
        return ""
    if isinstance(attributes, str):
        return attributes
    return encode_attributes(attributes)


def encode_payload(data, attributes) -> bytes:
    """``SendMessageRequestP2B.data``: header only when the attribute text is non-empty (§4.7)."""
    cdef str text = _attr_text(attributes)
    cdef Py_buffer buf
    cdef CBuf b
    cdef Py_ssize_t an
    cdef const char* a
    cdef bytes out
    cdef char* p
    if not text and PyBytes_CheckExact(data):
        return data
    _get(data, &b, &buf)
    try:
        if not text:
            return PyBytes_FromStringAndSize(<const char*>b.p, b.n)
        a = PyUnicode_AsUTF8AndSize(text, &an)
        out = PyBytes_FromStringAndSize(NULL, 4 + an + b.n)
        p = PyBytes_AS_STRING(out)
        tq_put_be32(p, <uint32_t>an)
        memcpy(p + 4, a, an)
        memcpy(p + 4 + an, b.p, b.n)
        return out
    finally:
        _release(&b, &buf)


def payload_flag(attributes) -> int:
    """Flag bit 0 is set only when a header is actually written (unlike the Java quirk, §4.7)."""
    if attributes is None:
        return 0
    return 1 if _attr_text(attributes) else 0


cdef int _split(const unsigned char* p, Py_ssize_t n, int64_t flag, Py_ssize_t* astart, Py_ssize_t* alen) noexcept:
    """Locate the attribute header: 0 ok (alen -1: no header), 1 malformed (message dropped)."""
    cdef int32_t ln
    if not flag & 1:
        alen[0] = -1
        return 0
    if n < 4:
        return 1
    ln = <int32_t>tq_get_be32(p)
    if ln < 0 or ln > n - 4:
        return 1
    astart[0] = 4
    alen[0] = ln
    return 0


cdef int _split_error(const unsigned char* p, Py_ssize_t n) except -1:
    if n < 4:
        raise DecodeError("flag says attributes but the payload is shorter than 4 bytes")
    raise DecodeError(f"attribute length {<int32_t>tq_get_be32(p)} does not fit in a {n}-byte payload")


def decode_payload(data, flag) -> tuple:
    """Split a stored payload into (attributes, body) (§4.9 steps 2-3)."""
    cdef Py_buffer buf
    cdef CBuf b
    cdef Py_ssize_t astart = 0, alen = -1
    cdef int64_t fl = _i64(flag)
    _get(data, &b, &buf)
    try:
        if _split(b.p, b.n, fl, &astart, &alen):
            _split_error(b.p, b.n)
        if alen < 0:
            return {}, PyBytes_FromStringAndSize(<const char*>b.p, b.n)
        return (_attrs_utf8(b.p + 4, alen),
                PyBytes_FromStringAndSize(<const char*>b.p + 4 + alen, b.n - 4 - alen))
    finally:
        _release(&b, &buf)


# ----------------------------------------------------------------------------------------------------
# strings (§4.1 - §4.3)


cdef enum:
    _SMALL_BIDS = 512  # broker ids below this are memoised in a list (real ids are small integers)
    _STACK_ITEMS = 16  # topicInfo items scanned without a heap allocation (one per broker of the topic)


@cython.final
cdef class _BrokerRef:
    """A broker as the topicInfo scanner needs it; ``atomic``: host and port are exact str/int."""
    cdef object bid_obj, host, port
    cdef bint atomic


cdef _BrokerRef _broker_ref(object bid_obj, object broker):
    cdef _BrokerRef ref = _BrokerRef.__new__(_BrokerRef)
    ref.bid_obj = bid_obj
    if type(broker) is BrokerInfo:
        ref.host = <object>PyTuple_GET_ITEM(broker, 1)
        ref.port = <object>PyTuple_GET_ITEM(broker, 2)
    else:
        ref.host = broker.host
        ref.port = broker.port
    ref.atomic = PyUnicode_CheckExact(ref.host) and PyLong_CheckExact(ref.port)
    return ref


@cython.final
cdef class _TopicInfoState:
    """Per-call state: the caps, the brokers seen (by id) and the last max-size value (usually all equal)."""
    cdef int64_t bid
    cdef PyObject* found  # borrowed: the _BrokerRef of ``bid``, or None when it is not in the mapping
    # memo[bid] for small ids, borrowed from ``keep``: NULL (not looked up yet), None or a _BrokerRef
    cdef PyObject* memo[_SMALL_BIDS]
    cdef list keep
    cdef int64_t size
    cdef object size_obj
    cdef int64_t max_partitions, max_total
    cdef object _budget  # the twin's PartitionBudget, made on first use (only the rare checks need it)

    def __cinit__(self):
        self.bid = -1
        self.size = -1
        self.keep = []
        self.found = <PyObject*>None
        memset(self.memo, 0, sizeof(self.memo))

    cdef object budget(self):
        if self._budget is None:
            self._budget = PartitionBudget(self.max_partitions, self.max_total)
        return self._budget

    cdef int lookup_slow(self, int64_t bid, object brokers, bint exact) except -1:
        """Look broker ``bid`` up in the mapping; ``found`` and the memo then hold it (or None)."""
        cdef object broker, ref, bid_obj = PyLong_FromLongLong(bid)
        cdef PyObject* hit
        if exact:
            hit = PyDict_GetItemWithError(brokers, bid_obj)
            if hit == NULL and PyErr_Occurred():
                return -1
            broker = <object>hit if hit != NULL else None
        else:
            broker = brokers.get(bid_obj)
        ref = None if broker is None else _broker_ref(bid_obj, broker)
        PyList_Append(self.keep, ref)
        self.bid = bid
        self.found = <PyObject*>ref
        if 0 <= bid < _SMALL_BIDS:
            self.memo[bid] = <PyObject*>ref
        return 0


cdef inline PyObject* _lookup(_TopicInfoState st, int64_t bid, object brokers, bint exact) except NULL:
    """The broker ``bid`` (borrowed: a _BrokerRef, or None when unknown); the mapping is asked once per id."""
    if bid != st.bid:
        if 0 <= bid < _SMALL_BIDS and st.memo[bid] != NULL:
            st.bid = bid
            st.found = st.memo[bid]
        else:
            st.lookup_slow(bid, brokers, exact)
    return st.found


cdef bint _topic_info_fast(str text, object brokers, bint exact, list partitions, dict sizes,
                           _TopicInfoState st) except -1:
    """Canonical ASCII ``topic#bid:parts:stores,...[#maxsize]`` (C scanner); False: use the twin's parser.

    The whole string is checked before anything is built, so on False nothing was added. Over a
    partition cap it raises DecodeError (through the twin's check, for the same message) before
    building anything for that item, in the twin's item order.
    """
    if PyUnicode_KIND(text) != 1 or not PyUnicode_IS_ASCII(text):
        return False
    cdef const unsigned char* s = <const unsigned char*>PyUnicode_DATA(text)
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text)
    cdef tq_ti_item stack_items[_STACK_ITEMS]
    cdef tq_ti_item* items = stack_items
    cdef Py_ssize_t tlen = 0, nitems, idx, start = PyList_GET_SIZE(partitions)
    cdef int64_t size = -1, parts, stores, count = 0, sidx, k, base
    cdef object topic, part
    cdef _BrokerRef ref
    cdef PyObject* found
    nitems = tq_topic_info_scan(s, n, &tlen, &size, items, _STACK_ITEMS)
    if nitems < 0:
        return False
    if nitems > _STACK_ITEMS:
        items = <tq_ti_item*>malloc(nitems * sizeof(tq_ti_item))
        if items == NULL:
            raise MemoryError()
        tq_topic_info_scan(s, n, &tlen, &size, items, nitems)
    try:
        topic = tq_ascii_str(s, tlen)
        for idx in range(nitems):
            found = _lookup(st, items[idx].bid, brokers, exact)
            if found == <PyObject*>None:
                continue
            ref = <_BrokerRef>found
            parts = items[idx].parts
            stores = items[idx].stores
            if parts > 0 and stores > 0:
                if (parts > st.max_partitions or stores > st.max_partitions
                        or start + count + parts * stores > st.max_partitions
                        or PyList_GET_SIZE(partitions) + parts * stores > st.max_total):
                    # over a cap, or this topic may have partitions from earlier entries: the twin's check
                    st.budget().check(topic, parts, stores, count, start, partitions)
                count += parts * stores
                for sidx in range(stores):
                    base = sidx * C_STORE_BASE
                    for k in range(parts):
                        if ref.atomic:
                            # only str and int inside: no cycle possible, so the tuple is never tracked by
                            # the collector (what CPython does to such tuples at its next collection)
                            part = tq_nt5_untracked(_PARTITION, ref.bid_obj, ref.host, ref.port, topic,
                                                    PyLong_FromLongLong(base + k))
                        else:
                            part = tq_nt5(_PARTITION, ref.bid_obj, ref.host, ref.port, topic,
                                          PyLong_FromLongLong(base + k))
                        PyList_Append(partitions, part)
            elif parts > st.max_partitions or stores > st.max_partitions:
                st.budget().check(topic, parts, stores, count, start, partitions)
    finally:
        if items != stack_items:
            free(items)
    if size >= 0:
        if size != st.size:
            st.size = size
            st.size_obj = PyLong_FromLongLong(size)
        PyDict_SetItem(sizes, topic, st.size_obj)
    return True


def parse_topic_info(topic_infos, brokers, *, max_partitions=DEFAULT_MAX_PARTITIONS,
                     max_total_partitions=DEFAULT_MAX_TOTAL_PARTITIONS) -> tuple:
    """Expand producer topicInfos into partitions; returns (partitions, {topic: max size}).

    A topic expanding to more than ``max_partitions`` partitions (over all its entries), or a call to
    more than ``max_total_partitions``, raises DecodeError before the excess is built.
    """
    cdef list partitions = []
    cdef dict sizes = tq_dict_presized(PyObject_LengthHint(topic_infos, 0))
    cdef bint exact = PyDict_CheckExact(brokers)
    cdef _TopicInfoState st = _TopicInfoState.__new__(_TopicInfoState)
    st.max_partitions = max_partitions
    st.max_total = max_total_partitions
    # While it fills, the list is hidden from the collector: a collection triggered by the new tuples
    # would otherwise walk the whole growing list each time (what it holds stays alive: the list owns it).
    PyObject_GC_UnTrack(partitions)
    try:
        for text in topic_infos:
            if not (PyUnicode_CheckExact(text) and _topic_info_fast(text, brokers, exact, partitions, sizes, st)):
                topic_info_entry(text, brokers, partitions, sizes, st.budget())
    finally:
        PyObject_GC_Track(partitions)
    return partitions, sizes


# ----------------------------------------------------------------------------------------------------
# messages


# the fields Message.__setattr__ writes, in the order of its dispatch
cdef tuple _MSG_FIELDS = ("topic", "data", "stream_id", "msg_time", "message_id", "flag", "partition", "offset")


cdef inline int _msg_field(object name):
    """Index of ``name`` in _MSG_FIELDS, or -1: by identity first (attribute names in code are interned,
    as are these), then by value (a name built at run time)."""
    cdef int i
    for i in range(8):
        if <PyObject*>name == PyTuple_GET_ITEM(_MSG_FIELDS, i):
            return i
    for i in range(8):
        if name == <object>PyTuple_GET_ITEM(_MSG_FIELDS, i):
            return i
    return -1


cdef inline void _track(object o) noexcept:
    """Put an object the decoder left untracked back under the collector (no-op when tracked)."""
    if not PyObject_GC_IsTracked(o):
        PyObject_GC_Track(o)


@cython.freelist(256)
cdef class Message:
    """A consumed (or to-be-sent) message.

    ``offset`` is a per-partition position: the fetch's start offset plus 28 × the message's index in
    that fetch. It is strictly increasing within a partition and equals the broker's index offset
    when the partition does not share its store with siblings (§4.10).
    """

    # Collector: the decoder builds messages untracked when every field is atomic (str, bytes, int,
    # None, a tuple of those) or a dict of str only it holds, like CPython's untracked tuples and
    # dicts: no cycle can pass through them, so a collection never visits them. A message is tracked
    # again before anything could make it part of a cycle: any field write (__setattr__: the fields
    # are readonly descriptors, so nothing writes around it), __init__ called again, and any access to
    # ``attributes`` (it hands out the mutable dict).

    def __init__(self, topic, data, attributes=None, stream_id=None, msg_time=None, message_id=0, flag=0,
                 partition=None, offset=-1):
        _track(self)
        self.topic = topic
        self.data = data
        self._attributes = attributes
        self.stream_id = stream_id
        self.msg_time = msg_time
        self.message_id = message_id
        self.flag = flag
        self.partition = partition
        self.offset = offset

    def __setattr__(self, name, value):
        _track(self)
        cdef int i = _msg_field(name)
        if i == 0:
            self.topic = value
        elif i == 1:
            self.data = value
        elif i == 2:
            self.stream_id = value
        elif i == 3:
            self.msg_time = value
        elif i == 4:
            self.message_id = value
        elif i == 5:
            self.flag = value
        elif i == 6:
            self.partition = value
        elif i == 7:
            self.offset = value
        else:  # attributes (its setter), a subclass's own attributes, or AttributeError
            PyObject_GenericSetAttr(self, name, <PyObject*>value)

    def __delattr__(self, name):
        # as before the fields became readonly: deleting one sets it to None
        if _msg_field(name) >= 0:
            setattr(self, name, None)
        else:
            PyObject_GenericSetAttr(self, name, NULL)

    @property
    def value(self):
        return self.data

    def inlongmsg(self):
        """Decode ``data`` as an InLong container (:func:`tubemq.inlongmsg.decode`)."""
        from .inlongmsg import decode

        return decode(self.data)

    @property
    def attributes(self):
        """The message's attributes; the empty dict of a message without any is made on first use."""
        _track(self)  # the caller gets the mutable dict: it could store the message in it
        if self._attributes is None:
            self._attributes = {}
        return self._attributes

    @attributes.setter
    def attributes(self, value):
        _track(self)
        self._attributes = value if value is not None else {}

    def __repr__(self):
        return message_repr(self)

    def __eq__(self, other):
        if not isinstance(other, Message):
            return NotImplemented
        cdef Message o = <Message>other
        return (self.topic == o.topic and self.data == o.data and self.attributes == o.attributes
                and self.stream_id == o.stream_id and self.msg_time == o.msg_time
                and self.message_id == o.message_id and self.flag == o.flag
                and self.partition == o.partition and self.offset == o.offset)

    def __ne__(self, other):
        r = self.__eq__(other)
        return r if r is NotImplemented else not r

    __hash__ = None

    def __reduce__(self):
        return (Message, (self.topic, self.data, self.attributes, self.stream_id, self.msg_time,
                          self.message_id, self.flag, self.partition, self.offset))


cdef extern from *:
    """
    /* A Message taken straight from the freelist Cython keeps for it (@cython.freelist), each field
       written once. Cython's own construction (tp_new) zero-fills the object, stores None in every
       field, and each assignment then swaps the None out again. The freelist's names are Cython's
       own: used only with the Cython releases this was built and tested with (3.3.0, 3.3.1), so a
       later release that renames them builds Cython's path instead of failing to compile; elsewhere
       the macro gives NULL and the caller takes Cython's path. Expanded inside functions, after
       Cython's declarations. */
    #if defined(CYTHON_HEX_VERSION) && CYTHON_HEX_VERSION >= 0x03030000 && CYTHON_HEX_VERSION < 0x03030200 \
        && CYTHON_USE_FREELISTS && CYTHON_COMPILING_IN_CPYTHON && !CYTHON_COMPILING_IN_CPYTHON_FREETHREADING
    #define TQ_MSG_POP() (__pyx_mstate_global->__pyx_freecount_6tubemq_6_codec_Message > 0 \
        ? (PyObject *)__pyx_mstate_global->__pyx_freelist_6tubemq_6_codec_Message[ \
            --__pyx_mstate_global->__pyx_freecount_6tubemq_6_codec_Message] \
        : (PyObject *)NULL)
    #define TQ_MSG_TYPE_SPECS CYTHON_USE_TYPE_SPECS
    #else
    #define TQ_MSG_POP() ((PyObject *)NULL)
    #define TQ_MSG_TYPE_SPECS 0
    #endif
    /* the nine object fields, in declaration order (checked contiguous at import) */
    #define TQ_MSG_FIELDS(o) (&((struct __pyx_obj_6tubemq_6_codec_Message *)(o))->topic)
    #define TQ_MSG_LAYOUT_OK (offsetof(struct __pyx_obj_6tubemq_6_codec_Message, offset) \
        - offsetof(struct __pyx_obj_6tubemq_6_codec_Message, topic) == 8 * sizeof(PyObject *))
    /* what Cython's tp_new does with a freelist entry, minus the zero-fill and the Nones; the one
       reference is the caller's */
    static inline PyObject *tq_msg_init(PyObject *o, PyTypeObject *t, PyObject **fields, PyObject *const *vals,
                                        int track) {
        int i;
    #if TQ_MSG_TYPE_SPECS
        Py_DECREF(Py_TYPE(o));  /* the freelist entry kept its type's reference */
    #endif
        (void)PyObject_INIT(o, t);
        for (i = 0; i < 9; i++) { Py_INCREF(vals[i]); fields[i] = vals[i]; }
        if (track) PyObject_GC_Track(o);
        return o;
    }
    #define TQ_MSG_NEW(o, t, vals, track) tq_msg_init((o), (t), TQ_MSG_FIELDS(o), (vals), (track))
    /* Whether a field value can never lead back to a message: not a collector object at all (str,
       bytes, int, None), or a tuple (exact, or a subclass without a __dict__, as NamedTuples are)
       holding only such values. The decoder checks what its caller passes (topic, partition) with
       this before it builds messages untracked. */
    static inline int tq_is_gc(PyObject *o) {  /* PyObject_IS_GC without the function call */
    #if defined(PYPY_VERSION) || defined(Py_LIMITED_API)
        return PyObject_IS_GC(o);
    #else
        PyTypeObject *t = Py_TYPE(o);
        return PyType_IS_GC(t) && (t->tp_is_gc == NULL || t->tp_is_gc(o));
    #endif
    }
    static int tq_atomic(PyObject *o) {
        Py_ssize_t i;
    #ifdef Py_GIL_DISABLED
        /* free-threaded: messages stay tracked (two threads writing one message could both find it
           untracked and track it twice) */
        (void)o; (void)i;
        return 0;
    #endif
        if (!tq_is_gc(o)) return 1;
        if (!PyTuple_Check(o) || Py_TYPE(o)->tp_dictoffset != 0) return 0;
        for (i = 0; i < PyTuple_GET_SIZE(o); i++)
            if (tq_is_gc(PyTuple_GET_ITEM(o, i))) return 0;
        return 1;
    }
    """
    PyObject* TQ_MSG_POP()
    bint TQ_MSG_LAYOUT_OK
    Message TQ_MSG_NEW(PyObject* o, PyTypeObject* t, PyObject** vals, bint track)
    bint tq_atomic(object o)


cdef bint _MSG_DIRECT = TQ_MSG_LAYOUT_OK


cdef Message c_new_message(object topic, object data, object attributes, object stream_id, object msg_time,
                           object message_id, object flag, object partition, object offset, bint track=True):
    """Build a Message without argument parsing (the decode hot path).

    ``track=False`` leaves it untracked by the collector: only for fields that satisfy tq_atomic, and
    an attribute dict of str that nothing else refers to (see the comment in Message)."""
    cdef PyObject* o = TQ_MSG_POP() if _MSG_DIRECT else NULL
    cdef PyObject* vals[9]
    if o != NULL:
        vals[0] = <PyObject*>topic
        vals[1] = <PyObject*>data
        vals[2] = <PyObject*>attributes
        vals[3] = <PyObject*>stream_id
        vals[4] = <PyObject*>msg_time
        vals[5] = <PyObject*>message_id
        vals[6] = <PyObject*>flag
        vals[7] = <PyObject*>partition
        vals[8] = <PyObject*>offset
        return TQ_MSG_NEW(o, <PyTypeObject*>Message, vals, track)
    cdef Message m = Message.__new__(Message)
    m.topic = topic
    m.data = data
    m._attributes = attributes
    m.stream_id = stream_id
    m.msg_time = msg_time
    m.message_id = message_id
    m.flag = flag
    m.partition = partition
    m.offset = offset
    if not track:
        PyObject_GC_UnTrack(m)
    return m


cdef inline object _dict_get(dict d, str key):
    cdef PyObject* v = PyDict_GetItem(d, key)
    return <object>v if v != NULL else None


cdef object _build_message(const unsigned char* p, Py_ssize_t n, int64_t mid, int32_t flag, object topic,
                           object partition, object offset, bint strict, bint track):
    """Payload -> Message (attributes split off); None when malformed and not ``strict``.

    ``track=False`` builds it untracked: the caller checked topic, partition and offset with tq_atomic;
    the rest is bytes, ints and a fresh dict of str."""
    cdef Py_ssize_t astart = 0, alen = -1
    cdef dict attrs
    if _split(p, n, flag, &astart, &alen):
        if strict:
            _split_error(p, n)
        return None
    if alen < 0:
        return c_new_message(topic, PyBytes_FromStringAndSize(<const char*>p, n), None, None, None,
                             mid, flag, partition, offset, track)
    attrs = _attrs_utf8(p + 4, alen)
    return c_new_message(topic, PyBytes_FromStringAndSize(<const char*>p + 4 + alen, n - 4 - alen), attrs,
                         _dict_get(attrs, _TYPE_KEY), _dict_get(attrs, _TIME_KEY), mid, flag, partition, offset,
                         track)


def decode_message(raw, topic, partition=None, offset=-1):
    """One TransferedMessage -> Message, or None when §4.9 says drop (bad checksum / header)."""
    cdef Py_buffer buf
    cdef CBuf b
    cdef int64_t checksum = _i64(raw.checksum)
    cdef int64_t mid = _i64(raw.message_id)
    cdef int64_t flag = _i64(raw.flag)
    _get(raw.payload, &b, &buf)
    try:
        if _crc(b.p, b.n) != checksum:
            return None
        return _build_message(b.p, b.n, mid, <int32_t>flag, topic, partition, offset, False,
                              not (tq_atomic(topic) and tq_atomic(partition) and tq_atomic(offset)))
    finally:
        _release(&b, &buf)


# ----------------------------------------------------------------------------------------------------
# hot path: send request / response, getMessage response


def encode_send_request(serial, str client_id, str topic, partition_id, data, flag, sent_addr, visit_token, *,
                        msg_type=None, msg_time=None, auth_token=None, checksum=-1, timeout_ms=10000,
                        service_type=3, protocol_ver=3) -> bytes:
    """The whole send-message frame, byte-identical to building SendMessageRequestP2B with protobuf."""
    if timeout_ms is None or timeout_ms <= 0:
        raise ValueError("timeout_ms must be positive: the server never answers a request without it")
    cdef uint32_t s = _serial32(serial)
    cdef uint64_t pid = <uint64_t>_i64(partition_id), fl = <uint64_t>_i64(flag)
    cdef uint64_t cs = <uint64_t>_i64(checksum), addr = <uint64_t>_i64(sent_addr)
    cdef uint64_t vt = <uint64_t>_i64(visit_token)
    cdef uint64_t st = <uint64_t>_i64(service_type), pv = <uint64_t>_i64(protocol_ver)
    cdef uint64_t t = <uint64_t>_i64(timeout_ms)
    cdef Py_ssize_t cn, tn, mtn = -1, mtin = -1, an = -1
    cdef const char* cid = _utf8(client_id, &cn)
    cdef const char* tp = _utf8(topic, &tn)
    cdef const char* mt = NULL
    cdef const char* mti = NULL
    cdef const char* at = NULL
    if msg_type is not None:
        mt = _utf8(msg_type, &mtn)
    if msg_time is not None:
        mti = _utf8(msg_time, &mtin)
    if auth_token:
        at = _utf8(auth_token, &an)
    cdef Py_buffer buf
    cdef CBuf b
    cdef Py_ssize_t auth_len, body_len, hlen, rlen, plen
    cdef char* p
    cdef bytes frame
    _get(data, &b, &buf)
    try:
        auth_len = _flen(vt) + (_blen(an) if an >= 0 else 0)
        body_len = (_blen(cn) + _blen(tn) + _flen(pid) + _blen(b.n) + _flen(fl) + _flen(cs) + _flen(addr)
                    + (_blen(mtn) if mtn >= 0 else 0) + (_blen(mtin) if mtin >= 0 else 0) + _blen(auth_len))
        hlen = _flen(st) + _flen(pv)
        rlen = _flen(C_METHOD_SEND_MESSAGE) + _flen(t) + _blen(body_len)
        plen = 3 + tq_varint_len(hlen) + hlen + tq_varint_len(rlen) + rlen
        frame = _new_frame(s, plen, &p)
        p = _put_conn(p, C_RPC_FLAG_REQUEST)
        p = tq_put_varint(p, hlen)
        p = _put_v(p, K_REQ_HDR_SERVICE_TYPE, st)
        p = _put_v(p, K_REQ_HDR_PROTOCOL_VER, pv)
        p = tq_put_varint(p, rlen)
        p = _put_v(p, K_REQ_BODY_METHOD, C_METHOD_SEND_MESSAGE)
        p = _put_v(p, K_REQ_BODY_TIMEOUT, t)
        p[0] = <char>K_REQ_BODY_REQUEST
        p = tq_put_varint(p + 1, body_len)
        p = _put_b(p, K_SEND_REQ_CLIENT_ID, cid, cn)
        p = _put_b(p, K_SEND_REQ_TOPIC, tp, tn)
        p = _put_v(p, K_SEND_REQ_PARTITION_ID, pid)
        p = _put_b(p, K_SEND_REQ_DATA, b.p, b.n)
        p = _put_v(p, K_SEND_REQ_FLAG, fl)
        p = _put_v(p, K_SEND_REQ_CHECKSUM, cs)
        p = _put_v(p, K_SEND_REQ_SENT_ADDR, addr)
        if mtn >= 0:
            p = _put_b(p, K_SEND_REQ_MSG_TYPE, mt, mtn)
        if mtin >= 0:
            p = _put_b(p, K_SEND_REQ_MSG_TIME, mti, mtin)
        p[0] = <char>K_SEND_REQ_AUTH_INFO
        p = tq_put_varint(p + 1, auth_len)
        p = _put_v(p, K_AUTH_VISIT_TOKEN, vt)
        if an >= 0:
            _put_b(p, K_AUTH_AUTH_TOKEN, at, an)
        _spread_blocks(frame, plen)
        return frame
    finally:
        _release(&b, &buf)


def decode_send_response(body) -> SendResponse:
    """SendMessageResponseB2P; the message id falls back to errMsg for old brokers (§3.7)."""
    cdef Py_buffer buf
    cdef CBuf b
    cdef Py_ssize_t q = 0
    cdef Field f
    cdef bint success = False, require_auth = False, has_mid = False
    cdef int32_t code = 0
    cdef int64_t mid = -1, atime = -1, aoff = -1
    cdef int seen = 0
    cdef object msg = "", mid_obj
    _get(body, &b, &buf)
    try:
        while _next(b.p, &q, b.n, &f):
            # one switch on the key as read (a field of another wire type is skipped, as before)
            if f.key == K_SEND_RSP_SUCCESS:
                success = f.v != 0
                seen |= 1
            elif f.key == K_SEND_RSP_ERR_CODE:
                code = _signed32(f.v)
                seen |= 2
            elif f.key == K_SEND_RSP_ERR_MSG:
                msg = _dec_msg(f.p, f.n)
                seen |= 4
            elif f.key == K_SEND_RSP_REQUIRE_AUTH:
                require_auth = f.v != 0
            elif f.key == K_SEND_RSP_MESSAGE_ID:
                mid = _signed(f.v)
                has_mid = True
            elif f.key == K_SEND_RSP_APPEND_TIME:
                atime = _signed(f.v)
            elif f.key == K_SEND_RSP_APPEND_OFFSET:
                aoff = _signed(f.v)
    finally:
        _release(&b, &buf)
    if seen != 7:
        raise DecodeError("SendMessageResponseB2P: Message missing required fields")
    if has_mid:
        mid_obj = PyLong_FromLongLong(mid)
    else:
        mid_obj = java_parse_long(msg) if success else -1
    # bools, ints and a str only: untracked, as CPython's collector would leave a plain tuple of them
    return tq_nt7_untracked(SendResponse, success, code, msg, mid_obj, atime, aoff, require_auth)


cdef int _transfered(const unsigned char* p, Py_ssize_t n, int64_t* mid, int32_t* cs,
                     const unsigned char** payload, Py_ssize_t* plen, int32_t* flag) except -1:
    cdef Py_ssize_t q = 0
    cdef Field f
    cdef int seen = 0
    while _next_wide(p, &q, n, &f):
        if f.key == K_TM_MESSAGE_ID:
            mid[0] = _signed(f.v)
            seen |= 1
        elif f.key == K_TM_CHECKSUM:
            cs[0] = _signed32(f.v)
            seen |= 2
        elif f.key == K_TM_PAYLOAD:
            payload[0] = f.p
            plen[0] = f.n
            seen |= 4
        elif f.key == K_TM_FLAG:
            flag[0] = _signed32(f.v)
            seen |= 8
    if seen != 15:
        raise DecodeError("TransferedMessage: Message missing required fields")
    return 0


cdef struct RawRef:
    int64_t mid
    int32_t cs
    int32_t flag
    const unsigned char* payload
    Py_ssize_t plen


cdef enum:
    _STACK_REFS = 16  # messages parsed without a heap allocation (a typical small fetch)


def decode_get_message_response(body, topic, partition=None, bint verify=True) -> GetMessageResult:
    """GetMessageResponseB2C with its messages decoded and checked (§3.7, §4.9)."""
    cdef Py_buffer buf
    cdef CBuf b
    cdef Py_ssize_t q = 0, i
    cdef Field f
    cdef bint success = False, esc = False, slow = False, big
    cdef int32_t code = 0, min_limit = 0
    cdef int64_t curr = -1, dlt = -1, max_off = -1
    cdef int seen = 0
    cdef Py_ssize_t nmsg = 0, cap = _STACK_REFS, dropped = 0
    cdef object msg = "", m, offset, curr_obj = None
    cdef list messages
    cdef Py_ssize_t kept = 0
    cdef RawRef stack_refs[_STACK_REFS]
    cdef RawRef* refs = stack_refs
    cdef RawRef* nr
    cdef RawRef* r
    # messages are built untracked by the collector when the caller's topic and partition are atomic
    cdef bint track = not (tq_atomic(topic) and tq_atomic(partition))
    _get(body, &b, &buf)
    try:
        while _next(b.p, &q, b.n, &f):
            if f.key == K_GET_RSP_SUCCESS:
                success = f.v != 0
                seen |= 1
            elif f.key == K_GET_RSP_ERR_CODE:
                code = _signed32(f.v)
                seen |= 2
            elif f.key == K_GET_RSP_ERR_MSG:
                msg = _dec_msg(f.p, f.n)
            elif f.key == K_GET_RSP_MESSAGES:
                # parsed (and required fields checked) now; built below once currOffset is known
                if nmsg == cap:
                    cap *= 2
                    if refs == stack_refs:
                        nr = <RawRef*>malloc(cap * sizeof(RawRef))
                        if nr != NULL:
                            memcpy(nr, stack_refs, nmsg * sizeof(RawRef))
                    else:
                        nr = <RawRef*>realloc(refs, cap * sizeof(RawRef))
                    if nr == NULL:
                        raise MemoryError()
                    refs = nr
                r = &refs[nmsg]
                _transfered(f.p, f.n, &r.mid, &r.cs, &r.payload, &r.plen, &r.flag)
                nmsg += 1
            elif f.key == K_GET_RSP_CURR_OFFSET:
                curr = _signed(f.v)
            elif f.key == K_GET_RSP_MIN_LIMIT_TIME:
                min_limit = _signed32(f.v)
            elif f.key == K_GET_RSP_ESC_FLOW_CTRL:
                esc = f.v != 0
            elif f.key == K_GET_RSP_CURR_DATA_DLT:
                dlt = _signed(f.v)
            elif f.key == K_GET_RSP_REQUIRE_SLOW:
                slow = f.v != 0
            elif f.key == K_GET_RSP_MAX_OFFSET:
                max_off = _signed(f.v)
        if seen != 3:
            raise DecodeError("GetMessageResponseB2C: Message missing required fields")
        # offsets past int64 (a hostile currOffset) are computed as Python ints, like the twin does
        big = curr > INT64_MAX - C_INDEX_ENTRY * <int64_t>nmsg
        curr_obj = curr  # shared by the result and the first message's offset
        # presized: every kept message is stored in place (NULL slots until then, which the list's
        # traversal and deallocation skip); the size is cut to the kept count after a drop
        messages = PyList_New(nmsg)
        for i in range(nmsg):
            r = &refs[i]
            if verify and curr < 0:
                offset = -1
            elif i == 0:
                offset = curr_obj
            elif big:
                offset = curr_obj + C_INDEX_ENTRY * i
            else:
                offset = PyLong_FromLongLong(curr + C_INDEX_ENTRY * i)
            if verify:
                if <int64_t>_crc(r.payload, r.plen) != r.cs:
                    m = None
                else:
                    m = _build_message(r.payload, r.plen, r.mid, r.flag, topic, partition, offset, False, track)
            else:
                m = _build_message(r.payload, r.plen, r.mid, r.flag, topic, partition, offset, True, track)
            if m is None:
                dropped += 1
            else:
                Py_INCREF(<PyObject*>m)
                PyList_SET_ITEM(messages, kept, m)
                kept += 1
        if kept != nmsg:
            Py_SET_SIZE(messages, kept)
    finally:
        if refs != stack_refs:
            free(refs)
        _release(&b, &buf)
    return tq_nt11(GetMessageResult, success, code, msg, messages, curr_obj, min_limit, esc, dlt, slow, max_off,
                   dropped)


def encode_transfered_message(message_id, checksum, payload, flag) -> bytes:
    """Server side: one TransferedMessage, in the form stored on disk and returned by getMessage."""
    cdef uint64_t mid = <uint64_t>_i64(message_id), cs = <uint64_t>_i64(checksum), fl = <uint64_t>_i64(flag)
    cdef Py_buffer buf
    cdef CBuf b
    cdef bytes out
    cdef char* p
    _get(payload, &b, &buf)
    try:
        out = PyBytes_FromStringAndSize(NULL, _flen(mid) + _flen(cs) + _blen(b.n) + _flen(fl))
        p = PyBytes_AS_STRING(out)
        p = _put_v(p, K_TM_MESSAGE_ID, mid)
        p = _put_v(p, K_TM_CHECKSUM, cs)
        p = _put_b(p, K_TM_PAYLOAD, b.p, b.n)
        _put_v(p, K_TM_FLAG, fl)
        return out
    finally:
        _release(&b, &buf)


def wrap_repeated(field, encoded_messages) -> bytes:
    """Server side: join pre-encoded sub-messages as a repeated LEN field (no re-encoding)."""
    cdef uint64_t key = ((<uint64_t>_i64(field)) << 3) | 2
    cdef list items = [m if PyBytes_CheckExact(m) else bytes(m) for m in encoded_messages]
    cdef Py_ssize_t total = 0, klen = tq_varint_len(key), n
    cdef bytes item, out
    cdef char* p
    for item in items:
        n = PyBytes_GET_SIZE(item)
        total += klen + tq_varint_len(<uint64_t>n) + n
    out = PyBytes_FromStringAndSize(NULL, total)
    p = PyBytes_AS_STRING(out)
    for item in items:
        n = PyBytes_GET_SIZE(item)
        p = tq_put_varint(p, key)
        p = tq_put_varint(p, <uint64_t>n)
        memcpy(p, PyBytes_AS_STRING(item), n)
        p += n
    return out
