"""The twin's RPC envelopes (§2): request and response frames."""

from __future__ import annotations

from typing import Any

from ...errors import DecodeError
from ...protocol import wire_fields as F
from .datatypes import Request, Response
from .frame import encode_frame
from .pbwire import (
    FieldSpec,
    _f_bytes,
    _f_varint,
    _read_delimited,
    _read_fields,
    _signed32,
    _signed64,
    _utf8,
    _varint,
)

_V, _LEN = F.WT_VARINT, F.WT_LEN
#: what the decoders keep of each message of the envelope (pbwire._read_fields)
_CONN_HEADER: FieldSpec = {F.CONN_FLAG: (_V, _signed32)}
_REQ_HEADER: FieldSpec = {F.REQ_HDR_SERVICE_TYPE: (_V, _signed32), F.REQ_HDR_PROTOCOL_VER: (_V, _signed32)}
_REQ_BODY: FieldSpec = {
    F.REQ_BODY_METHOD: (_V, _signed32), F.REQ_BODY_TIMEOUT: (_V, _signed64), F.REQ_BODY_REQUEST: (_LEN, bytes)
}
_RSP_HEADER: FieldSpec = {F.RSP_HDR_STATUS: (_V, _signed32), F.RSP_HDR_PROTOCOL_VER: (_V, _signed32)}
_RSP_BODY: FieldSpec = {F.RSP_BODY_METHOD: (_V, _signed32), F.RSP_BODY_DATA: (_LEN, bytes)}
_RSP_EXCEPTION: FieldSpec = {F.RSP_EXC_NAME: (_LEN, _utf8), F.RSP_EXC_MESSAGE: (_LEN, _utf8)}


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
    flag = _read_fields(conn, _CONN_HEADER).get(F.CONN_FLAG)
    if flag is None:
        raise DecodeError("RpcConnHeader: Message missing required fields: flag")
    head = _read_fields(header, _REQ_HEADER)
    req = _read_fields(body, _REQ_BODY)
    if F.REQ_BODY_METHOD not in req:
        raise DecodeError("RequestBody: Message missing required fields: method")
    return Request(
        flag, head.get(F.REQ_HDR_SERVICE_TYPE, -1), head.get(F.REQ_HDR_PROTOCOL_VER, -1), req[F.REQ_BODY_METHOD],
        req.get(F.REQ_BODY_TIMEOUT), req.get(F.REQ_BODY_REQUEST, b""),
    )


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
    flag = _read_fields(conn, _CONN_HEADER).get(F.CONN_FLAG, 0)
    head = _read_fields(header, _RSP_HEADER)
    status = head.get(F.RSP_HDR_STATUS)
    if status is None:
        raise DecodeError("ResponseHeader without status")
    protocol_ver = head.get(F.RSP_HDR_PROTOCOL_VER, -1)
    if status == 0:
        rsp = _read_fields(body, _RSP_BODY)
        if F.RSP_BODY_METHOD not in rsp or F.RSP_BODY_DATA not in rsp:
            raise DecodeError("RspResponseBody: Message missing required fields")
        return Response(flag, status, rsp[F.RSP_BODY_METHOD], rsp[F.RSP_BODY_DATA], "", "", protocol_ver)
    exc = _read_fields(body, _RSP_EXCEPTION)
    if F.RSP_EXC_NAME not in exc:
        raise DecodeError("RspExceptionBody: Message missing required fields: exceptionName")
    return Response(flag, status, -1, b"", exc[F.RSP_EXC_NAME], exc.get(F.RSP_EXC_MESSAGE, ""), protocol_ver)
