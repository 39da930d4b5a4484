/* The producer topicInfo scanner: "topic#bid:parts:stores,...[#size]" in one pass.
   Part of tubemq.codec.compiled (included by compiled.pyx through `cdef extern from`). */
#ifndef TUBEMQ_TQ_TOPICINFO_H
#define TUBEMQ_TQ_TOPICINFO_H

#include <Python.h>
#include <stdint.h>
#include <string.h>

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

#endif /* TUBEMQ_TQ_TOPICINFO_H */
