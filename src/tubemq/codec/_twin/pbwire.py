"""The twin's protobuf wire helpers: only what the hot flat messages need (the codec sits below
the generated protobuf modules)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ...errors import DecodeError


def _varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _read_varint(buf: Any, pos: int, end: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if pos >= end:
            raise DecodeError("truncated varint")
        b = buf[pos]
        pos += 1
        if shift == 63 and b > 1:  # a 10th byte may carry only bit 63 (protobuf's 64-bit limit)
            raise DecodeError("varint longer than 64 bits")
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def _signed64(v: int) -> int:
    v &= 0xFFFFFFFFFFFFFFFF
    return v - (1 << 64) if v >= 1 << 63 else v


def _signed32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


def _iter_fields(buf: Any, pos: int, end: int) -> Iterable[tuple[int, int, Any]]:
    """Yield (field number, wire type, value); value is int for varints, a slice for LEN fields."""
    while pos < end:
        key, pos = _read_varint(buf, pos, end)
        field, wt = key >> 3, key & 7
        if wt == 0:
            value, pos = _read_varint(buf, pos, end)
        elif wt == 2:
            n, pos = _read_varint(buf, pos, end)
            if pos + n > end:
                raise DecodeError("truncated length-delimited field")
            value = buf[pos : pos + n]
            pos += n
        elif wt == 1:
            if pos + 8 > end:
                raise DecodeError("truncated fixed64")
            value = int.from_bytes(buf[pos : pos + 8], "little")
            pos += 8
        elif wt == 5:
            if pos + 4 > end:
                raise DecodeError("truncated fixed32")
            value = int.from_bytes(buf[pos : pos + 4], "little")
            pos += 4
        else:
            raise DecodeError(f"unsupported wire type {wt}")
        if field == 0:
            raise DecodeError("field number 0")
        yield field, wt, value


#: The fields of one message a decoder keeps: field number -> (wire type, conversion of the value).
FieldSpec = Mapping[int, tuple[int, Callable[[Any], Any]]]


def _utf8(v: Any) -> str:
    return bytes(v).decode("utf-8", "replace")


def _read_fields(buf: Any, spec: FieldSpec, repeated: int = 0) -> dict[int, Any]:
    """The fields of one message that ``spec`` names, converted; a field seen twice keeps its last value
    (protobuf's rule for scalars), except field ``repeated``, whose values are kept in a list. Fields of
    another wire type or not in ``spec`` are skipped."""
    out: dict[int, Any] = {repeated: []} if repeated else {}
    for f, wt, v in _iter_fields(buf, 0, len(buf)):
        kept = spec.get(f)
        if kept is not None and kept[0] == wt:
            if f == repeated:
                out[f].append(kept[1](v))
            else:
                out[f] = kept[1](v)
    return out


def _f_varint(field: int, value: int) -> bytes:
    return _varint(field << 3) + _varint(value)


def _f_bytes(field: int, value: bytes) -> bytes:
    return _varint((field << 3) | 2) + _varint(len(value)) + value


def _read_delimited(buf: Any, pos: int, end: int) -> tuple[Any, int]:
    n, pos = _read_varint(buf, pos, end)
    if pos + n > end:
        raise DecodeError("truncated delimited message")
    return buf[pos : pos + n], pos + n
