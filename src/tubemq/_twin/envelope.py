"""The twin's RPC envelopes (§2): request and response frames."""

from __future__ import annotations

from typing import Any

from ..errors import DecodeError
from ..protocol import wire_fields as F
from .datatypes import Request, Response
from .frame import encode_frame
from .pbwire import _f_bytes, _f_varint, _iter_fields, _read_delimited, _signed32, _signed64, _varint


def _request_payload(service_type: int, method: int, body: Any, timeout_ms: int, protocol_ver: int) -> bytes:
    conn = _f_varint(F.CONN_FLAG, 0)
    header = _f_varint(F.REQ_HDR_SERVICE_TYPE, service_type) + _f_varint(F.REQ_HDR_PROTOCOL_VER, protocol_ver)
    req_body = (
        _f_varint(F.REQ_BODY_METHOD, method)
        + _f_varint(F.REQ_BODY_TIMEOUT, timeout_ms)
        + _f_bytes(F.REQ_BODY_REQUEST, bytes(body))
    )
    return (
        _varint(len(conn)) + conn + _varint(len(header)) + header + _varint(len(req_body)) + req_body
    )


def encode_request(
    serial: int,
    service_type: int,
    method: int,
    body: Any,
    *,
    timeout_ms: int,
    protocol_ver: int = 3,
) -> bytes:
    """A whole request frame: RpcConnHeader{flag 0} + RequestHeader + RequestBody(method, timeout, body)."""
    if timeout_ms is None or timeout_ms <= 0:
        raise ValueError("timeout_ms must be positive: the server never answers a request without it")
    return encode_frame(serial, _request_payload(service_type, method, body, timeout_ms, protocol_ver))


def _three_delimited(payload: Any) -> tuple[Any, Any, Any]:
    """The connection header, RPC header and body of a request or response frame (§1.4)."""
    buf = memoryview(payload).cast("B")
    end = len(buf)
    conn, pos = _read_delimited(buf, 0, end)
    header, pos = _read_delimited(buf, pos, end)
    body, pos = _read_delimited(buf, pos, end)
    return conn, header, body


def decode_request(payload: Any) -> Request:
    """Server side: the three delimited messages of a request (trailing bytes ignored, §1.4)."""
    conn, header, body = _three_delimited(payload)
    flag = None
    for f, wt, v in _iter_fields(conn, 0, len(conn)):
        if f == F.CONN_FLAG and wt == F.WT_VARINT:
            flag = _signed32(v)
    if flag is None:
        raise DecodeError("RpcConnHeader: Message missing required fields: flag")
    service_type = protocol_ver = -1
    for f, wt, v in _iter_fields(header, 0, len(header)):
        if f == F.REQ_HDR_SERVICE_TYPE and wt == F.WT_VARINT:
            service_type = _signed32(v)
        elif f == F.REQ_HDR_PROTOCOL_VER and wt == F.WT_VARINT:
            protocol_ver = _signed32(v)
    method = None
    timeout: int | None = None
    req = b""
    for f, wt, v in _iter_fields(body, 0, len(body)):
        if f == F.REQ_BODY_METHOD and wt == F.WT_VARINT:
            method = _signed32(v)
        elif f == F.REQ_BODY_TIMEOUT and wt == F.WT_VARINT:
            timeout = _signed64(v)
        elif f == F.REQ_BODY_REQUEST and wt == F.WT_LEN:
            req = bytes(v)
    if method is None:
        raise DecodeError("RequestBody: Message missing required fields: method")
    return Request(flag, service_type, protocol_ver, method, timeout, req)


#: Delimited RpcConnHeader{flag: response}, the same in every response.
_RESPONSE_CONN = _varint(2) + _f_varint(F.CONN_FLAG, 1)


def _response_frame(serial: int, header: bytes, body: bytes) -> bytes:
    """RpcConnHeader{flag 1} + the delimited ResponseHeader and body message, framed."""
    return encode_frame(serial, _RESPONSE_CONN + _varint(len(header)) + header + _varint(len(body)) + body)


def encode_response(serial: int, method: int, body: Any, *, protocol_ver: int = 3) -> bytes:
    """Server side: a success response frame (flag 1, status SUCCESS, protocolVer 3)."""
    header = _f_varint(F.RSP_HDR_STATUS, 0) + _f_varint(F.RSP_HDR_PROTOCOL_VER, protocol_ver)
    rsp = _f_varint(F.RSP_BODY_METHOD, method) + _f_bytes(F.RSP_BODY_DATA, bytes(body))
    return _response_frame(serial, header, rsp)


def encode_error_response(
    serial: int, exception_name: str, message: str, *, status: int = 1, protocol_ver: int | None = 3
) -> bytes:
    """Server side: ERROR (status + protocolVer) or FATAL (status only) with an RspExceptionBody."""
    header = _f_varint(F.RSP_HDR_STATUS, status)
    if protocol_ver is not None:
        header += _f_varint(F.RSP_HDR_PROTOCOL_VER, protocol_ver)
    exc = _f_bytes(F.RSP_EXC_NAME, exception_name.encode()) + _f_bytes(F.RSP_EXC_MESSAGE, message.encode())
    return _response_frame(serial, header, exc)


def decode_response(payload: Any) -> Response:
    """Client side: the three delimited messages of a response (trailing bytes ignored)."""
    conn, header, body = _three_delimited(payload)
    flag = 0
    for f, wt, v in _iter_fields(conn, 0, len(conn)):
        if f == F.CONN_FLAG and wt == F.WT_VARINT:
            flag = _signed32(v)
    status = None
    protocol_ver = -1
    for f, wt, v in _iter_fields(header, 0, len(header)):
        if f == F.RSP_HDR_STATUS and wt == F.WT_VARINT:
            status = _signed32(v)
        elif f == F.RSP_HDR_PROTOCOL_VER and wt == F.WT_VARINT:
            protocol_ver = _signed32(v)
    if status is None:
        raise DecodeError("ResponseHeader without status")
    if status == 0:
        method = None
        data = None
        for f, wt, v in _iter_fields(body, 0, len(body)):
            if f == F.RSP_BODY_METHOD and wt == F.WT_VARINT:
                method = _signed32(v)
            elif f == F.RSP_BODY_DATA and wt == F.WT_LEN:
                data = bytes(v)
        if method is None or data is None:
            raise DecodeError("RspResponseBody: Message missing required fields")
        return Response(flag, status, method, data, "", "", protocol_ver)
    name = None
    message = ""
    for f, wt, v in _iter_fields(body, 0, len(body)):
        if f == F.RSP_EXC_NAME and wt == F.WT_LEN:
            name = bytes(v).decode("utf-8", "replace")
        elif f == F.RSP_EXC_MESSAGE and wt == F.WT_LEN:
            message = bytes(v).decode("utf-8", "replace")
    if name is None:
        raise DecodeError("RspExceptionBody: Message missing required fields: exceptionName")
    return Response(flag, status, -1, b"", name, message, protocol_ver)
