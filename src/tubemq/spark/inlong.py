"""``valueFormat=inlongmsg``: InLong containers as rows, in both directions.

Read: every TubeMQ message is decoded as an InLongMsg container (:mod:`tubemq.inlongmsg`) and
exploded into one row per record::

    body BINARY, attributes MAP<STRING, STRING>, group_id STRING, stream_id STRING, dt TIMESTAMP,
    topic STRING, partition STRING, broker_id INT, partition_id INT, offset BIGINT, message_id BIGINT,
    record_index INT

``attributes`` is the record's attribute string parsed as InLong Sort does; ``group_id`` /
``stream_id`` are its ``groupId`` / ``streamId`` (``bid`` / ``tid`` on old producers) and ``dt`` its
data time (``dt``, epoch ms). ``offset`` and ``message_id`` are the TubeMQ message's, shared by its
records; ``record_index`` is the record's position in the container. A message that is not an
InLong container fails the task (TubeMQSparkError naming topic, partition and offset).

Write: rows are packed into containers grouped by (topic, attribute string), each closed when it
reaches the ``capacity`` option (bytes, default 4096; ``compress=true`` snappy-compresses them).
Columns: ``body`` or ``value`` (BINARY or STRING, required), ``attributes`` (MAP), ``group_id``,
``stream_id`` (STRING) and ``dt`` (TIMESTAMP) -- the last three fill ``groupId``/``streamId``/``dt``
when the map lacks them -- and ``topic``. Each container is sent like DataProxy sends one: its
``streamId`` is the TubeMQ stream id (``$msgType$``) and its ``dt`` the ``msgTime``.

This module is the format (schemas, rows <-> records); sending the containers is
:mod:`tubemq.spark.writer`'s, which imports this one (never the other way round).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, InLongMsgError
from ._compat import TubeMQSparkError
from .schema import struct_of, typed_columns

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa
    from pyspark.sql.types import StructType

    from ..codec import Message


READ_COLUMNS = (
    ("body", "binary"),
    ("attributes", "map<string,string>"),
    ("group_id", "string"),
    ("stream_id", "string"),
    ("dt", "timestamp"),
    ("topic", "string"),
    ("partition", "string"),
    ("broker_id", "int"),
    ("partition_id", "int"),
    ("offset", "bigint"),
    ("message_id", "bigint"),
    ("record_index", "int"),
)

WRITE_COLUMNS = {
    "body": ("binary", "string"),
    "value": ("binary", "string"),
    "attributes": ("map<string,string>",),
    "group_id": ("string",),
    "stream_id": ("string",),
    "dt": ("timestamp",),
    "topic": ("string",),
}

#: Open containers per write task (distinct topic + attribute strings); the oldest is sent beyond it.
MAX_OPEN_CONTAINERS = 1024


def read_schema() -> StructType:
    return struct_of(READ_COLUMNS)


def check_read_schema(schema: StructType) -> None:
    got = [(f.name, f.dataType.simpleString()) for f in schema.fields]
    if got != list(READ_COLUMNS):
        ddl = ", ".join(f"{n} {t.upper()}" for n, t in READ_COLUMNS)
        raise ConfigError("schema", f"with valueFormat=inlongmsg the tubemq source has a fixed schema ({ddl}); "
                          "do not pass .schema(...)")


def dt_micros(value: str | None) -> int | None:
    if value is None:
        return None
    value = value.strip()
    if not value.isdigit() or len(value) > 15:
        return None
    return int(value) * 1000


class InLongArrowBuilder:
    """The read side's ``ArrowBuilder`` for ``valueFormat=inlongmsg``: one row per record."""

    def __init__(self, arrow_schema: pa.Schema) -> None:
        self.schema = arrow_schema
        self._attr_cache: dict[str, tuple[list[tuple[str, str]], str | None, str | None, int | None]] = {}
        self._reset()

    def _reset(self) -> None:
        self.bodies: list[bytes] = []
        self.attrs: list[list[tuple[str, str]]] = []
        self.groups: list[str | None] = []
        self.streams: list[str | None] = []
        self.dts: list[int | None] = []
        self.offsets: list[int | None] = []
        self.ids: list[int] = []
        self.indexes: list[int] = []

    def __len__(self) -> int:
        return len(self.bodies)

    def _attr(self, attr: str) -> tuple[list[tuple[str, str]], str | None, str | None, int | None]:
        hit = self._attr_cache.get(attr)
        if hit is None:
            from ..inlongmsg import parse_attr

            kv = parse_attr(attr)
            hit = (list(kv.items()), kv.get("groupId", kv.get("bid")), kv.get("streamId", kv.get("tid")),
                   dt_micros(kv.get("dt")))
            if len(self._attr_cache) >= 4096:
                self._attr_cache.clear()
            self._attr_cache[attr] = hit
        return hit

    def extend(self, msgs: Sequence[Message], offset: int | None = None) -> None:
        """``offset``: the start offset of the fetch the messages came in (see ``ArrowBuilder.extend``)."""
        from ..inlongmsg import decode

        for msg in msgs:
            try:
                container = decode(msg.data)
            except InLongMsgError as exc:
                part = msg.partition
                raise TubeMQSparkError(
                    f"valueFormat=inlongmsg: message {msg.message_id} (fetched at offset {offset}) of {msg.topic} "
                    f"(partition {part.key if part else '?'}) is not an InLong container: {exc}"
                ) from exc
            index = 0
            for attr in container.attrs:
                items, group, stream, dt = self._attr(attr)
                bodies = container.bodies(attr)
                n = len(bodies)
                self.bodies.extend(bodies)
                self.attrs.extend([items] * n)
                self.groups.extend([group] * n)
                self.streams.extend([stream] * n)
                self.dts.extend([dt] * n)
                self.offsets.extend([msg.offset if offset is None else offset] * n)
                self.ids.extend([msg.message_id] * n)
                self.indexes.extend(range(index, index + n))
                index += n

    def flush(self, topic: str, broker_id: int, partition_id: int) -> pa.RecordBatch:
        import pyarrow as pa

        n = len(self.bodies)
        s = self.schema
        arrays: list[Any] = [
            pa.array(self.bodies, s.field("body").type),
            pa.array(self.attrs, s.field("attributes").type),
            pa.array(self.groups, s.field("group_id").type),
            pa.array(self.streams, s.field("stream_id").type),
            pa.array(self.dts, pa.int64()).cast(s.field("dt").type),
            pa.array([topic] * n, s.field("topic").type),
            pa.array([f"{broker_id}:{topic}:{partition_id}"] * n, s.field("partition").type),
            pa.array([broker_id] * n, s.field("broker_id").type),
            pa.array([partition_id] * n, s.field("partition_id").type),
            pa.array(self.offsets, s.field("offset").type),
            pa.array(self.ids, s.field("message_id").type),
            pa.array(self.indexes, s.field("record_index").type),
        ]
        batch = pa.RecordBatch.from_arrays(arrays, schema=s)
        self._reset()
        return batch


# ---- write side


def check_write_schema(schema: StructType, topic_option: str | None) -> dict[str, str]:
    """The columns a ``valueFormat=inlongmsg`` write uses: {column: simple type}."""
    used = {name: kind for _, name, kind in typed_columns(schema, WRITE_COLUMNS)}
    if "body" not in used and "value" not in used:
        raise ConfigError("body", "valueFormat=inlongmsg needs a 'body' (or 'value') column, BINARY or STRING")
    if topic_option is None and "topic" not in used:
        raise ConfigError("topic", "set the 'topic' option or give the DataFrame a 'topic' column")
    return used


def inlong_records(batch: pa.RecordBatch, used: dict[str, str], topic_option: str | None
             ) -> Iterator[tuple[str | None, bytes | None, str]]:
    """(topic, body, attribute string) per row."""
    from ..inlongmsg import format_attr

    names = {n.lower(): n for n in batch.schema.names if n.lower() in used}
    n = batch.num_rows

    def col(name: str) -> list[Any]:
        real = names.get(name)
        return batch.column(real).to_pylist() if real is not None else [None] * n

    body_col = "body" if "body" in names else "value"
    bodies = col(body_col)
    if used.get(body_col) == "string":
        bodies = [b.encode("utf-8") if b is not None else None for b in bodies]
    topics = [topic_option] * n if topic_option is not None else col("topic")
    maps, groups, streams, dts = col("attributes"), col("group_id"), col("stream_id"), col("dt")
    for i in range(n):
        kv = dict(maps[i]) if maps[i] else {}
        if groups[i] is not None:
            kv.setdefault("groupId", groups[i])
        if streams[i] is not None:
            kv.setdefault("streamId", streams[i])
        if dts[i] is not None:
            d: _dt.datetime = dts[i] if dts[i].tzinfo else dts[i].replace(tzinfo=_dt.timezone.utc)
            kv.setdefault("dt", str(int(d.timestamp() * 1000)))
        yield topics[i], bodies[i], format_attr(kv)
