"""Row layout of the source (a Kafka-source look-alike) and Arrow conversion in both directions.

Read schema::

    value BINARY, topic STRING, partition STRING (brokerId:topic:partitionId), broker_id INT,
    partition_id INT, offset BIGINT, timestamp TIMESTAMP, message_id BIGINT, stream_id STRING
    [, attributes MAP<STRING, STRING>]   -- with includeAttributes=true

``timestamp`` is the message's TubeMQ ``msgTime`` header (``yyyyMMddHHmm``, minute precision, in
the producer's local time zone -- override with ``msgTimeZone``), null when the producer set none.
``attributes`` holds the user attributes; the system headers ``$msgType$`` / ``$msgTime$`` are
already the ``stream_id`` / ``timestamp`` columns and are left out.

Rows leave the reader as ``pyarrow.RecordBatch`` es whose Arrow schema is exactly what PySpark
derives from the Spark schema (``to_arrow_schema(..., timezone="UTC")``), so Spark does no per-row
Python conversion at all.

Write columns (by name, any order, other columns ignored): ``value`` (BINARY or STRING, required),
``topic`` (STRING), ``stream_id`` (STRING), ``attributes`` (MAP<STRING, STRING>), ``key`` (STRING or
BINARY, routes to a partition by hash), ``timestamp`` (TIMESTAMP -> ``msgTime``).
"""

from __future__ import annotations

import datetime as _dt
import operator
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa
    from pyspark.sql.types import StructType

    from ..codec import Message

BASE_COLUMNS = (
    ("value", "binary"),
    ("topic", "string"),
    ("partition", "string"),
    ("broker_id", "int"),
    ("partition_id", "int"),
    ("offset", "bigint"),
    ("timestamp", "timestamp"),
    ("message_id", "bigint"),
    ("stream_id", "string"),
)
ATTRIBUTES_COLUMN = ("attributes", "map<string,string>")
#: ``includeHeaders=true``: Spark Kafka's ``headers`` column, the user attributes as (key, UTF-8 value).
HEADERS_COLUMN = ("headers", "array<struct<key:string,value:binary>>")

#: System attribute keys TubeMQ puts in the attribute header (already exposed as columns).
SYSTEM_ATTRIBUTES = ("$msgType$", "$msgTime$")

WRITE_COLUMNS = {
    "value": ("binary", "string"),
    "topic": ("string",),
    "stream_id": ("string",),
    "attributes": ("map<string,string>",),
    "key": ("string", "binary"),
    "timestamp": ("timestamp",),
}


def column_names(include_attributes: bool) -> list[str]:
    names = [n for n, _ in BASE_COLUMNS]
    if include_attributes:
        names.append(ATTRIBUTES_COLUMN[0])
    return names


def ddl(include_attributes: bool) -> str:
    """The read schema as a DDL string (for documentation and error messages)."""
    cols = list(BASE_COLUMNS) + ([ATTRIBUTES_COLUMN] if include_attributes else [])
    return ", ".join(f"{n} {t.upper()}" for n, t in cols)


def read_schema(include_attributes: bool, include_headers: bool = False) -> StructType:
    """The Spark schema of the source (built without a JVM: DDL parsing would need one)."""
    cols = list(BASE_COLUMNS) + ([ATTRIBUTES_COLUMN] if include_attributes else [])
    cols += [HEADERS_COLUMN] if include_headers else []
    return struct_of(cols)


def struct_of(columns: Sequence[tuple[str, str]]) -> StructType:
    """A nullable ``StructType`` from (name, simple type) pairs."""
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        LongType,
        MapType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    kinds = {
        "binary": BinaryType(),
        "string": StringType(),
        "int": IntegerType(),
        "bigint": LongType(),
        "timestamp": TimestampType(),
        "map<string,string>": MapType(StringType(), StringType(), True),
        HEADERS_COLUMN[1]: ArrayType(
            StructType([StructField("key", StringType(), True), StructField("value", BinaryType(), True)]), True
        ),
    }
    return StructType([StructField(name, kinds[t], True) for name, t in columns])


def check_read_schema(schema: StructType, include_attributes: bool) -> None:
    """Accept the source's schema or a subset of its columns (any order, same types).

    Python data sources get no column pruning from Spark, so a user who needs only some columns names
    them with ``.schema(...)``: the reader then builds and ships only those (each column costs Arrow
    building in the Python worker and conversion in the JVM). ``attributes`` may be named whether or not
    ``includeAttributes`` is set.
    """
    known = dict(BASE_COLUMNS + (ATTRIBUTES_COLUMN, HEADERS_COLUMN))
    seen: set[str] = set()
    for f in schema.fields:
        name = f.name.lower()
        kind = f.dataType.simpleString()
        want = known.get(name)
        if want is None or kind != want or name in seen:
            why = (
                f"unknown column {f.name!r}" if want is None
                else f"column {f.name!r} appears twice" if name in seen
                else f"column {f.name!r} is {want.upper()}, not {kind.upper()}"
            )
            raise ConfigError(
                "schema",
                f"{why}: a .schema(...) for the tubemq source must name some of its columns with their types "
                f"({ddl(True)}), or leave it out to get the fixed schema ({ddl(include_attributes)})",
            )
        seen.add(name)
    if not seen:
        raise ConfigError("schema", f"a .schema(...) for the tubemq source needs at least one column of {ddl(True)}")


def typed_columns(schema: StructType, columns: dict[str, tuple[str, ...]]) -> list[tuple[str, str, str]]:
    """(field name, lower-case name, simple type) of the fields a write uses, in schema order; a used
    column of another type fails with ConfigError naming it (names match case-insensitively)."""
    out: list[tuple[str, str, str]] = []
    for f in schema.fields:
        name = f.name.lower()
        if name not in columns:
            continue
        kind = f.dataType.simpleString()
        if kind not in columns[name]:
            raise ConfigError(
                name,
                f"column {f.name!r} must be {' or '.join(t.upper() for t in columns[name])}, got {kind.upper()}",
            )
        out.append((f.name, name, kind))
    return out


def check_write_schema(schema: StructType, topic_option: str | None) -> dict[str, str]:
    """Validate the DataFrame's columns for a write; returns {column: simple type} of the used ones."""
    used = {fname: kind for fname, _, kind in typed_columns(schema, WRITE_COLUMNS)}
    lowered = {k.lower() for k in used}
    if "value" not in lowered:
        raise ConfigError(
            "value", "the DataFrame needs a 'value' column (BINARY or STRING) to write to TubeMQ"
        )
    if topic_option is None and "topic" not in lowered:
        raise ConfigError("topic", "set the 'topic' option or give the DataFrame a 'topic' column")
    return used


# ---- read side: messages -> Arrow


_MISSING = object()


class TimeParser:
    """``msgTime`` text (``yyyyMMddHHmm`` / ``yyyyMMddHHmmss`` / epoch ms) -> epoch microseconds.

    Memoised with a bounded cache: a fetch holds many messages of the same minute.
    """

    _MAX_CACHE = 4096

    def __init__(self, zone: str | None) -> None:
        self._tz: _dt.tzinfo | None = None
        if zone is not None:
            import zoneinfo

            self._tz = zoneinfo.ZoneInfo(zone)
        self._cache: dict[str, int | None] = {}

    def __call__(self, text: str | None) -> int | None:
        if not text:
            return None
        hit = self._cache.get(text, _MISSING)
        if hit is not _MISSING:
            return hit  # type: ignore[return-value]
        value = self._parse(text)
        if len(self._cache) >= self._MAX_CACHE:
            self._cache.clear()
        self._cache[text] = value
        return value

    def _parse(self, text: str) -> int | None:
        t = text.strip()
        if not t.isdigit():
            return None
        try:
            if len(t) == 13:  # epoch milliseconds
                return int(t) * 1000
            if len(t) == 12:
                d = _dt.datetime.strptime(t, "%Y%m%d%H%M")
            elif len(t) == 14:
                d = _dt.datetime.strptime(t, "%Y%m%d%H%M%S")
            else:
                return None
        except ValueError:
            return None
        d = d.replace(tzinfo=self._tz) if self._tz is not None else d.astimezone()
        return int(d.timestamp()) * 1_000_000


def format_msg_time(value: _dt.datetime, zone: str | None) -> str:
    """A ``timestamp`` column value -> TubeMQ ``msgTime`` (``yyyyMMddHHmm`` in ``zone``/local time)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=_dt.timezone.utc)
    if zone is not None:
        import zoneinfo

        value = value.astimezone(zoneinfo.ZoneInfo(zone))
    else:
        value = value.astimezone()
    return value.strftime("%Y%m%d%H%M")


_DATA = operator.attrgetter("data")
_OFFSET = operator.attrgetter("offset")
_MSG_TIME = operator.attrgetter("msg_time")
_MESSAGE_ID = operator.attrgetter("message_id")
_STREAM_ID = operator.attrgetter("stream_id")


class ArrowBuilder:
    """Accumulates messages column-wise and emits ``RecordBatch`` es of the exact Spark Arrow schema.

    Only the columns of ``arrow_schema`` are collected and built (a user schema may name a subset,
    in any order; see :func:`check_read_schema`). Two columns are kept run-length encoded while they
    come in runs, which is what a fetch delivers: ``offset`` (the exact start offset of the fetch the
    row came in, the same for all of its messages: one ``(start, count)`` part per chunk) and
    ``timestamp`` (a chunk usually carries one ``msgTime`` minute: one ``(value, count)`` part, a
    ``pa.repeat`` at flush when the whole batch has one). Both fall back to plain per-message lists
    for chunks that are not runs.
    """

    def __init__(self, arrow_schema: pa.Schema, zone: str | None) -> None:
        self.schema = arrow_schema
        self.columns = [name.lower() for name in arrow_schema.names]
        wanted = set(self.columns)
        self.want_value = "value" in wanted
        self.want_offset = "offset" in wanted
        self.want_time = "timestamp" in wanted
        self.want_id = "message_id" in wanted
        self.want_stream = "stream_id" in wanted
        self.want_attrs = ATTRIBUTES_COLUMN[0] in wanted
        self.want_headers = HEADERS_COLUMN[0] in wanted
        self.parse_time = TimeParser(zone)
        self._reset()

    def _reset(self) -> None:
        self.count = 0
        self.values: list[bytes] = []
        self.offset_parts: list[tuple[int, int] | list[int]] = []
        self.time_parts: list[tuple[int | None, int] | list[int | None]] = []
        self.ids: list[int] = []
        self.streams: list[str | None] = []
        self.attrs: list[list[tuple[str, str]]] = []
        self.headers: list[list[dict[str, Any]]] = []

    def __len__(self) -> int:
        return self.count

    def add(self, msg: Message, offset: int | None = None) -> None:
        self.extend((msg,), offset)

    def extend(self, msgs: Sequence[Message], offset: int | None = None) -> None:
        """Append messages column-wise: the hot loop of a read, so C-level ``map``/``attrgetter``, one
        time parse per distinct ``msg_time`` of the chunk, and runs kept as runs (see the class).

        ``offset``: the start offset of the fetch the messages came in, the ``offset`` of each row (a
        consumed message has no offset of its own); None takes each message's ``offset``."""
        n = len(msgs)
        if not n:
            return
        self.count += n
        if self.want_value:
            self.values.extend(map(_DATA, msgs))
        if self.want_offset:
            if offset is not None:
                self.offset_parts.append((offset, n))
            else:
                self.offset_parts.append(list(map(_OFFSET, msgs)))
        if self.want_time:
            texts = list(map(_MSG_TIME, msgs))
            distinct = set(texts)
            parse = self.parse_time
            if len(distinct) == 1:
                self.time_parts.append((parse(texts[0]), n))
            else:
                parsed = {t: parse(t) for t in distinct}
                self.time_parts.append(list(map(parsed.__getitem__, texts)))
        if self.want_id:
            self.ids.extend(map(_MESSAGE_ID, msgs))
        if self.want_stream:
            self.streams.extend(map(_STREAM_ID, msgs))
        if self.want_attrs:
            system = SYSTEM_ATTRIBUTES
            self.attrs.extend(
                [
                    [(k, v) for k, v in m.attributes.items() if k not in system] if m.attributes else []
                    for m in msgs
                ]
            )

        if self.want_headers:
            system = SYSTEM_ATTRIBUTES
            self.headers.extend(
                [
                    [{"key": k, "value": v.encode()} for k, v in m.attributes.items() if k not in system]
                    if m.attributes else []
                    for m in msgs
                ]
            )

    def _offsets(self, pa: Any, kind: Any) -> Any:
        arrays = [
            pa.repeat(pa.scalar(p[0], pa.int64()), p[1]) if isinstance(p, tuple) else pa.array(p, pa.int64())
            for p in self.offset_parts
        ]
        out = arrays[0] if len(arrays) == 1 else pa.concat_arrays(arrays)
        return out if out.type == kind else out.cast(kind)

    def _times(self, pa: Any, kind: Any, n: int) -> Any:
        parts = self.time_parts
        head = parts[0]
        if isinstance(head, tuple) and all(isinstance(p, tuple) and p[0] == head[0] for p in parts):
            return pa.repeat(pa.scalar(head[0], pa.int64()), n).cast(kind)
        values: list[int | None] = []
        for p in parts:
            values.extend([p[0]] * p[1] if isinstance(p, tuple) else p)
        return pa.array(values, pa.int64()).cast(kind)

    def _column(self, pa: Any, name: str, kind: Any, n: int, topic: str, broker_id: int, partition_id: int) -> Any:
        if name == "value":
            return pa.array(self.values, kind)
        if name == "topic":  # constant per partition: no n-item lists
            return pa.repeat(pa.scalar(topic, kind), n)
        if name == "partition":
            return pa.repeat(pa.scalar(f"{broker_id}:{topic}:{partition_id}", kind), n)
        if name == "broker_id":
            return pa.repeat(pa.scalar(broker_id, kind), n)
        if name == "partition_id":
            return pa.repeat(pa.scalar(partition_id, kind), n)
        if name == "offset":
            return pa.array([], kind) if n == 0 else self._offsets(pa, kind)
        if name == "timestamp":
            return pa.array([], kind) if n == 0 else self._times(pa, kind, n)
        if name == "message_id":
            return pa.array(self.ids, kind)
        if name == "stream_id":
            return pa.array(self.streams, kind)
        if name == HEADERS_COLUMN[0]:
            return pa.array(self.headers, kind)
        return pa.array(self.attrs, kind)  # "attributes" (check_read_schema admits nothing else)

    def flush(self, topic: str, broker_id: int, partition_id: int) -> pa.RecordBatch:
        """The buffered rows as one batch (constant columns for the partition), then reset."""
        import pyarrow as pa

        n = self.count
        s = self.schema
        arrays = [
            self._column(pa, name, s.field(i).type, n, topic, broker_id, partition_id)
            for i, name in enumerate(self.columns)
        ]
        batch = pa.RecordBatch.from_arrays(arrays, schema=s)
        self._reset()
        return batch


def arrow_schema_for(schema: StructType) -> pa.Schema:
    """The Arrow schema PySpark expects for ``schema`` (PySpark checks batches against it)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")


# ---- write side: Arrow -> send arguments


def rows_for_send(
    batch: pa.RecordBatch, used: dict[str, str], topic_option: str | None, zone: str | None
) -> Iterable[tuple[str | None, bytes | None, dict[str, str] | None, str | None, Any, str | None]]:
    """(topic, value bytes, attributes, stream_id, key, msg_time) per row of ``batch``."""
    names = {n.lower(): n for n in batch.schema.names if n in used}
    n = batch.num_rows

    def col(name: str) -> Sequence[Any]:
        real = names.get(name)
        if real is None:
            return [None] * n
        return batch.column(real).to_pylist()

    values = col("value")
    if used.get(names.get("value", ""), "binary") == "string":
        values = [v.encode("utf-8") if v is not None else None for v in values]
    topics = [topic_option] * n if topic_option is not None else col("topic")
    attrs = col("attributes")
    streams = col("stream_id")
    keys = col("key")
    times_raw = col("timestamp")
    times = (
        [format_msg_time(t, zone) if t is not None else None for t in times_raw]
        if "timestamp" in names
        else times_raw
    )
    for i in range(n):
        a = attrs[i]
        yield topics[i], values[i], (dict(a) if a else None), streams[i], keys[i], times[i]
