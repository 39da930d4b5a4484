# Included by compiled.pyx: attribute text and message payloads (§4.6, §4.7).


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
