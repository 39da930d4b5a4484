# Included by compiled.pyx: framing (docs/PROTOCOL.md §1): encode_frame and the streaming FrameDecoder.


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
# result) starts 1 - 31 bytes past the source modulo 4 KiB: glibc's ``rep movsb`` memcpy is many times
# slower for that distance on some x86-64 CPUs (4 KiB aliasing of source and destination).
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
        per 4 KiB and a munmap for every large frame, a large share of a consumer's CPU.
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
