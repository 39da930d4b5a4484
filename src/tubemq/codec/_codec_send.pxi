# Included by compiled.pyx: the hot path: send request / response and the getMessage response.


def encode_send_request(serial, str client_id, str topic, partition_id, data, flag, sent_addr, visit_token, *,
                        msg_type=None, msg_time=None, auth_token=None, checksum=-1, timeout_ms=10000,
                        service_type=3, protocol_ver=3) -> bytes:
    """The whole send-message frame, byte-identical to building SendMessageRequestP2B with protobuf."""
    if timeout_ms is None or timeout_ms <= 0:
        raise ValueError("timeout_ms must be positive: the server never answers a request without it")
    return c_encode_send(_serial32(serial), client_id, topic, _i64(partition_id), data, _i64(flag),
                         _i64(sent_addr), _i64(visit_token), msg_type, msg_time, auth_token or None,
                         _i64(checksum), _i64(timeout_ms), _i64(service_type), _i64(protocol_ver))


cdef bytes c_encode_send(uint32_t s, str client_id, str topic, int64_t partition_id, object data, int64_t flag,
                         int64_t sent_addr, int64_t visit_token, object msg_type, object msg_time,
                         object auth_token, int64_t checksum, int64_t timeout_ms, int64_t service_type,
                         int64_t protocol_ver):
    """:func:`encode_send_request` for callers in C (the blocking send's compiled route): the same
    frame, the arguments already checked (``auth_token``: None or a non-empty str)."""
    cdef uint64_t pid = <uint64_t>partition_id, fl = <uint64_t>flag
    cdef uint64_t cs = <uint64_t>checksum, addr = <uint64_t>sent_addr
    cdef uint64_t vt = <uint64_t>visit_token
    cdef uint64_t st = <uint64_t>service_type, pv = <uint64_t>protocol_ver
    cdef uint64_t t = <uint64_t>timeout_ms
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
    if auth_token is not None:
        at = _utf8(auth_token, &an)
    cdef Py_buffer buf
    cdef CBuf b
    cdef Py_ssize_t auth_len, body_len, plen
    cdef char* p
    cdef bytes frame
    _get(data, &b, &buf)
    try:
        auth_len = _flen(vt) + (_blen(an) if an >= 0 else 0)
        body_len = (_blen(cn) + _blen(tn) + _flen(pid) + _blen(b.n) + _flen(fl) + _flen(cs) + _flen(addr)
                    + (_blen(mtn) if mtn >= 0 else 0) + (_blen(mtin) if mtin >= 0 else 0) + _blen(auth_len))
        frame = _open_request(s, st, pv, C_METHOD_SEND_MESSAGE, t, body_len, &p, &plen)
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


def decode_send_result(payload, result_type, topic, partition, key):
    """A send answer (a response frame's payload) straight to what a sender returns:
    ``result_type(topic, partition, message_id, append_time, append_offset, key)`` when the broker
    stored the message, None when it did not (an error status or a refusal: decode_response and
    decode_send_response tell which). Raises DecodeError on a malformed answer."""
    return c_send_result(payload, result_type, topic, partition, key)


cdef object c_send_result(object payload, object result_type, object topic, object partition, object key):
    """:func:`decode_send_result` for callers in C: the envelope and the answer are read in place
    (no intermediate Response or SendResponse objects, no copy of the body)."""
    cdef Py_buffer buf
    cdef CBuf b
    cdef Py_ssize_t pos = 0, cn, hn, bn, q = 0
    cdef const unsigned char* conn
    cdef const unsigned char* header
    cdef const unsigned char* body
    cdef const unsigned char* data = NULL
    cdef Py_ssize_t dn = 0
    cdef Field f
    cdef bint has_status = False, has_method = False
    cdef int32_t status = 0
    cdef SendAnswer a
    cdef object mid_obj
    _get(payload, &b, &buf)
    try:
        _delimited(b.p, &pos, b.n, &conn, &cn)
        _delimited(b.p, &pos, b.n, &header, &hn)
        _delimited(b.p, &pos, b.n, &body, &bn)
        while _next(conn, &q, cn, &f):  # (read as decode_response reads it: the same errors)
            pass
        q = 0
        while _next(header, &q, hn, &f):
            if f.num == RSP_HDR_STATUS and f.wt == WT_VARINT:
                status = _signed32(f.v)
                has_status = True
        if not has_status:
            raise DecodeError("ResponseHeader without status")
        if status != C_STATUS_SUCCESS:
            decode_response(payload)  # an error answer (rare): read whole, so a malformed one raises alike
            return None
        q = 0
        while _next(body, &q, bn, &f):
            if f.num == RSP_BODY_METHOD and f.wt == WT_VARINT:
                has_method = True
            elif f.num == RSP_BODY_DATA and f.wt == WT_LEN:
                data = f.p
                dn = f.n
        if not has_method or data == NULL:
            raise DecodeError("RspResponseBody: Message missing required fields")
        _send_answer(data, dn, &a)
        if not a.success:
            return None
        if a.has_mid:
            mid_obj = PyLong_FromLongLong(a.mid)
        else:
            mid_obj = java_parse_long(_dec_msg(a.msg_p, a.msg_n))
        return tq_nt6(result_type, topic, partition, mid_obj, a.atime, a.aoff, key)
    finally:
        _release(&b, &buf)


cdef struct SendAnswer:
    bint success
    bint require_auth
    bint has_mid
    int32_t code
    int64_t mid
    int64_t atime
    int64_t aoff
    const unsigned char* msg_p
    Py_ssize_t msg_n


cdef int _send_answer(const unsigned char* p, Py_ssize_t n, SendAnswer* a) except -1:
    """SendMessageResponseB2P's fields, read in place (errMsg as a pointer into ``p``)."""
    cdef Py_ssize_t q = 0
    cdef Field f
    cdef int seen = 0
    a.success = False
    a.require_auth = False
    a.has_mid = False
    a.code = 0
    a.mid = -1
    a.atime = -1
    a.aoff = -1
    a.msg_p = NULL
    a.msg_n = 0
    while _next(p, &q, n, &f):
        # one switch on the key as read (a field of another wire type is skipped, as before)
        if f.key == K_SEND_RSP_SUCCESS:
            a.success = f.v != 0
            seen |= 1
        elif f.key == K_SEND_RSP_ERR_CODE:
            a.code = _signed32(f.v)
            seen |= 2
        elif f.key == K_SEND_RSP_ERR_MSG:
            a.msg_p = f.p
            a.msg_n = f.n
            seen |= 4
        elif f.key == K_SEND_RSP_REQUIRE_AUTH:
            a.require_auth = f.v != 0
        elif f.key == K_SEND_RSP_MESSAGE_ID:
            a.mid = _signed(f.v)
            a.has_mid = True
        elif f.key == K_SEND_RSP_APPEND_TIME:
            a.atime = _signed(f.v)
        elif f.key == K_SEND_RSP_APPEND_OFFSET:
            a.aoff = _signed(f.v)
    if seen != 7:
        raise DecodeError("SendMessageResponseB2P: Message missing required fields")
    return 0


def decode_send_response(body) -> SendResponse:
    """SendMessageResponseB2P; the message id falls back to errMsg for old brokers (§3.7)."""
    cdef Py_buffer buf
    cdef CBuf b
    cdef SendAnswer a
    cdef object msg, mid_obj
    _get(body, &b, &buf)
    try:
        _send_answer(b.p, b.n, &a)
        msg = _dec_msg(a.msg_p, a.msg_n)
    finally:
        _release(&b, &buf)
    if a.has_mid:
        mid_obj = PyLong_FromLongLong(a.mid)
    else:
        mid_obj = java_parse_long(msg) if a.success else -1
    # bools, ints and a str only: untracked, as CPython's collector would leave a plain tuple of them
    return tq_nt7_untracked(SendResponse, a.success, a.code, msg, mid_obj, a.atime, a.aoff, a.require_auth)


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
    cdef bint success = False, esc = False, slow = False
    cdef int32_t code = 0, min_limit = 0
    cdef int64_t curr = -1, dlt = -1, max_off = -1, off = 0
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
        curr_obj = curr
        # presized: every kept message is stored in place (NULL slots until then, which the list's
        # traversal and deallocation skip); the size is cut to the kept count after a drop
        messages = PyList_New(nmsg)
        # no per-message offset: the answer carries none, and start + 28 x i is wrong whenever the
        # partition shares its store (its index entries interleave with its siblings'); the batch's
        # start (currOffset) and the offset a commit answers are the exact positions
        offset = None
        for i in range(nmsg):
            r = &refs[i]
            if verify:
                if <int64_t>_crc(r.payload, r.plen) != r.cs:
                    m = None
                else:
                    m = _build_message(r.payload, r.plen, r.mid, r.flag, topic, partition, offset,
                                       off, False, track)
            else:
                m = _build_message(r.payload, r.plen, r.mid, r.flag, topic, partition, offset,
                                   off, True, track)
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
