"""Text helpers of the wire format, one source for both codecs and the InLongMsg decoder.

The pure-Python twin (:mod:`tubemq.codec.python`) and :mod:`tubemq.inlongmsg` import this module; the
compiled codec compiles the same source into itself with Cython's ``include`` (``compiled.pyx``), so
the attribute text rules are written once and still run as C-level code in the compiled build.
Because of that ``include``: no ``from __future__`` import here, annotations valid at run time on
Python 3.10, and nothing but these functions (imports are the compiled module's own, too).
"""

from collections.abc import Mapping
from typing import Any

from ..protocol.constants import TOKEN_MSG_TIME, TOKEN_MSG_TYPE


def encode_attributes(attributes: Mapping[Any, Any] | None) -> str:
    """``k=v`` items joined with ``,``; keys/values must not contain ``,`` or ``=``."""
    if not attributes:
        return ""
    items = []
    for k, v in attributes.items():
        k = str(k)
        v = "" if v is None else str(v)
        if not k or "," in k or "=" in k or "," in v or "=" in v:
            raise ValueError(f"attribute {k!r}={v!r}: keys and values must be non-empty keys without ',' or '='")
        items.append(f"{k}={v}")
    return ",".join(items)


def put_system_header(previous: Any, msg_type: Any, msg_time: Any) -> str:
    """``Message.putSystemHeader``: ``$msgType$``/``$msgTime$`` first, then old non-system items."""
    items = []
    if msg_type and msg_type.strip():
        items.append(f"{TOKEN_MSG_TYPE}={msg_type.strip()}")
    if msg_time and msg_time.strip():
        items.append(f"{TOKEN_MSG_TIME}={msg_time.strip()}")
    if previous:
        for item in previous.split(","):
            if item and TOKEN_MSG_TYPE not in item and TOKEN_MSG_TIME not in item:
                items.append(item)
    return ",".join(items)


def java_hash(text: Any) -> int:
    """Java ``String.hashCode`` over UTF-16 code units, int32 wrap-around (filter keys, §4.8).

    The compiled codec defines a C loop under the same name after its ``include`` of this file.
    """
    h = 0
    raw = text.encode("utf-16-be")
    for i in range(0, len(raw), 2):
        h = (31 * h + ((raw[i] << 8) | raw[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h
