"""The twin's attribute text and message payloads (§4.6, §4.7)."""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any

from ...errors import DecodeError
from .._text import encode_attributes

_I32 = struct.Struct(">i")


def decode_attributes(text: str | None) -> dict[str, str]:
    """Parse an attribute string the way Java's ``getAttrValue`` reads it (malformed items skipped)."""
    result: dict[str, str] = {}
    if not text:
        return result
    for item in text.split(","):
        if not item:
            continue
        parts = item.split("=")
        if len(parts) < 2 or not parts[0]:
            continue
        result[parts[0]] = parts[1]
    return result


def encode_payload(data: Any, attributes: str | Mapping[str, Any] | None) -> bytes:
    """``SendMessageRequestP2B.data``: header only when the attribute text is non-empty (§4.7)."""
    if attributes is None or isinstance(attributes, str):
        text = attributes or ""
    else:
        text = encode_attributes(attributes)
    body = bytes(data)
    if not text:
        return body
    raw = text.encode("utf-8")
    return _I32.pack(len(raw)) + raw + body


def payload_flag(attributes: str | Mapping[str, Any] | None) -> int:
    """Flag bit 0 is set only when a header is actually written (unlike the Java quirk, §4.7)."""
    if attributes is None:
        return 0
    return 1 if (attributes if isinstance(attributes, str) else encode_attributes(attributes)) else 0


def _split_payload(data: Any, flag: int) -> tuple[str | None, Any]:
    if not flag & 1:
        return None, data
    n = len(data)
    if n < 4:
        raise DecodeError("flag says attributes but the payload is shorter than 4 bytes")
    (alen,) = _I32.unpack_from(data, 0)
    if alen < 0 or alen > n - 4:
        raise DecodeError(f"attribute length {alen} does not fit in a {n}-byte payload")
    attr = bytes(data[4 : 4 + alen]).decode("utf-8", "replace") if alen > 0 else None
    return attr, data[4 + alen :]


def decode_payload(data: Any, flag: int) -> tuple[dict[str, str], bytes]:
    """Split a stored payload into (attributes, body) (§4.9 steps 2-3)."""
    attr, body = _split_payload(data, flag)
    return decode_attributes(attr), bytes(body)
