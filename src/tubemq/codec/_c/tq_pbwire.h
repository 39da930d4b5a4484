/* Protobuf (proto2) wire primitives: varints, big-endian words, one field at a time.
   Part of tubemq.codec.compiled (included by compiled.pyx through `cdef extern from`). */
#ifndef TUBEMQ_TQ_PBWIRE_H
#define TUBEMQ_TQ_PBWIRE_H

#include <Python.h>
#include <stdint.h>

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
   Unrolled and branchy on purpose: a branch-free 8-byte decode is slower here (the lengths in a
   stream repeat, so the branches are predicted, and they do not wait on the load). */
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
   (inlining this too makes getMessage decoding slower: the decoders stop being inlined). */
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

#endif /* TUBEMQ_TQ_PBWIRE_H */
