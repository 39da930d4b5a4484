"""Output helpers: aligned text tables for people, JSON for scripts, and message rendering.

Messages are written either ``raw`` (the body bytes plus a delimiter, byte-exact) or ``json`` (one
JSON object per line with metadata; bodies that are not UTF-8 go to ``data_b64``). ``tubemq produce
--format envelope`` reads the json form back, so a topic can be copied through files losslessly.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["format_table", "message_to_json", "envelope_fields", "print_json"]

_SYSTEM_KEYS = frozenset({"$msgType$", "$msgTime$"})


def format_table(headers: Sequence[str], rows: Iterable[Sequence[Any]], *, indent: str = "") -> str:
    """A left-aligned plain text table (numbers right-aligned), no trailing spaces."""
    str_rows = [["" if v is None else str(v) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in str_rows:
        for i, v in enumerate(row):
            if i < len(widths):
                widths[i] = max(widths[i], len(v))
            else:
                widths.append(len(v))

    def numeric(v: str) -> bool:
        return bool(v) and v.replace(".", "", 1).replace("-", "", 1).replace(",", "").replace("_", "").isdigit()

    def line(cells: Sequence[str], align_numbers: bool) -> str:
        out = []
        for i, v in enumerate(cells):
            w = widths[i]
            out.append(v.rjust(w) if align_numbers and numeric(v) else v.ljust(w))
        return (indent + "  ".join(out)).rstrip()

    lines = [line(list(headers), False), (indent + "  ".join("-" * w for w in widths)).rstrip()]
    lines += [line(r, True) for r in str_rows]
    return "\n".join(lines)


def print_json(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=True, default=str)


def message_to_json(msg: Any) -> str:
    """One message as a compact JSON line (no newline)."""
    part = getattr(msg, "partition", None)
    rec: dict[str, Any] = {
        "topic": msg.topic,
        "partition": getattr(part, "partition_id", part),
        "broker_id": getattr(part, "broker_id", None),
        "offset": getattr(msg, "offset", None),
        "message_id": getattr(msg, "message_id", None),
        "stream_id": getattr(msg, "stream_id", None) or None,
        "msg_time": getattr(msg, "msg_time", None) or None,
        # $msgType$ / $msgTime$ are the stream_id / msg_time fields already
        "attributes": {k: v for k, v in (getattr(msg, "attributes", None) or {}).items() if k not in _SYSTEM_KEYS},
    }
    data = bytes(msg.data)
    try:
        rec["data"] = data.decode("utf-8")
    except UnicodeDecodeError:
        rec["data_b64"] = base64.b64encode(data).decode("ascii")
    return json.dumps(rec, ensure_ascii=False, separators=(",", ":"))


def envelope_fields(line: str | bytes) -> tuple[bytes, dict[str, str], str | None]:
    """Parse one envelope line (the ``message_to_json`` shape) into (data, attributes, stream_id).

    Raises ValueError with a readable reason for anything else.
    """
    rec = json.loads(line)
    if not isinstance(rec, dict):
        raise ValueError("an envelope line must be a JSON object")
    if "data" in rec:
        value = rec["data"]
        if isinstance(value, str):
            data = value.encode("utf-8")
        else:
            data = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    elif "data_b64" in rec:
        data = base64.b64decode(rec["data_b64"], validate=True)
    else:
        raise ValueError("an envelope needs a 'data' or 'data_b64' field")
    attrs_in = rec.get("attributes") or {}
    if not isinstance(attrs_in, dict):
        raise ValueError("'attributes' must be an object")
    attrs = {str(k): str(v) for k, v in attrs_in.items()}
    stream_id = rec.get("stream_id")
    return data, attrs, (str(stream_id) if stream_id else None)
