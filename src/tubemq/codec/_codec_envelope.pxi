# Included by compiled.pyx: the RPC envelopes (§2): protobuf field reading, request and response frames.

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


cdef inline bytes _open_request(uint32_t s, uint64_t st, uint64_t pv, uint64_t m, uint64_t t, Py_ssize_t body_len,
                                char** body, Py_ssize_t* plen):
    """A request frame written up to its ``RequestBody.request`` bytes, which the caller writes at
    ``body[0]`` (``body_len`` of them) before ``_spread_blocks(frame, plen[0])``."""
    cdef Py_ssize_t hlen = _flen(st) + _flen(pv)
    cdef Py_ssize_t rlen = _flen(m) + _flen(t) + _blen(body_len)
    cdef char* p
    plen[0] = 3 + tq_varint_len(hlen) + hlen + tq_varint_len(rlen) + rlen
    cdef bytes frame = _new_frame(s, plen[0], &p)
    p = _put_conn(p, C_RPC_FLAG_REQUEST)
    p = tq_put_varint(p, hlen)
    p = _put_v(p, K_REQ_HDR_SERVICE_TYPE, st)
    p = _put_v(p, K_REQ_HDR_PROTOCOL_VER, pv)
    p = tq_put_varint(p, rlen)
    p = _put_v(p, K_REQ_BODY_METHOD, m)
    p = _put_v(p, K_REQ_BODY_TIMEOUT, t)
    p[0] = <char>K_REQ_BODY_REQUEST
    body[0] = tq_put_varint(p + 1, <uint64_t>body_len)
    return frame


cdef inline bytes _open_response(uint32_t s, uint64_t status, bint has_pv, uint64_t pv, Py_ssize_t body_len,
                                 char** body, Py_ssize_t* plen):
    """A response frame (RpcConnHeader{flag 1} + ResponseHeader) up to its body message, which the caller
    writes at ``body[0]`` (``body_len`` bytes) before ``_spread_blocks(frame, plen[0])``."""
    cdef Py_ssize_t hlen = _flen(status) + (_flen(pv) if has_pv else 0)
    cdef char* p
    plen[0] = 3 + tq_varint_len(hlen) + hlen + tq_varint_len(body_len) + body_len
    cdef bytes frame = _new_frame(s, plen[0], &p)
    p = _put_conn(p, C_RPC_FLAG_RESPONSE)
    p = tq_put_varint(p, hlen)
    p = _put_v(p, K_RSP_HDR_STATUS, status)
    if has_pv:
        p = _put_v(p, K_RSP_HDR_PROTOCOL_VER, pv)
    body[0] = tq_put_varint(p, <uint64_t>body_len)
    return frame


def encode_request(serial, service_type, method, body, *, timeout_ms, protocol_ver=3) -> bytes:
    """A whole request frame: RpcConnHeader{flag 0} + RequestHeader + RequestBody(method, timeout, body)."""
    if timeout_ms is None or timeout_ms <= 0:
        raise ValueError("timeout_ms must be positive: the server never answers a request without it")
    cdef uint32_t s = _serial32(serial)
    cdef uint64_t st = <uint64_t>_i64(service_type), pv = <uint64_t>_i64(protocol_ver)
    cdef uint64_t m = <uint64_t>_i64(method), t = <uint64_t>_i64(timeout_ms)
    cdef Py_buffer buf
    cdef CBuf b
    cdef Py_ssize_t plen
    cdef char* p
    cdef bytes frame
    _get(body, &b, &buf)
    try:
        frame = _open_request(s, st, pv, m, t, b.n, &p, &plen)
        if b.n:
            memcpy(p, b.p, b.n)
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
    cdef Py_ssize_t plen
    cdef char* p
    cdef bytes frame
    _get(body, &b, &buf)
    try:
        frame = _open_response(s, C_STATUS_SUCCESS, True, pv, _flen(m) + _blen(b.n), &p, &plen)
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
    cdef Py_ssize_t nn, mn, plen
    cdef const char* name = _utf8(exception_name, &nn)
    cdef const char* msg = _utf8(message, &mn)
    cdef char* p
    cdef bint has_pv = protocol_ver is not None
    if has_pv:
        pv = <uint64_t>_i64(protocol_ver)
    cdef bytes frame = _open_response(s, st, has_pv, pv, _blen(nn) + _blen(mn), &p, &plen)
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
