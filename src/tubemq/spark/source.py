"""``TubeMQDataSource``: the ``format("tubemq")`` entry point of PySpark's Python Data Source API.

Options are validated where Spark calls in on the driver, before any task runs: ``schema()`` (at
``load()``) checks the read options, ``reader``/``streamReader`` the batch- or streaming-only
ones, ``writer``/``streamWriter`` the write options and the DataFrame's columns. Every failure is
a :class:`tubemq.errors.ConfigError` naming the option.

Each of those calls runs in a Python worker that Spark may have just started (it stops workers idle for
a minute), so this module imports only what every call needs; the reader, writer, streaming and
InLong modules (and with them the asyncio client) are imported by the call that uses them.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from ..errors import ConfigError
from ._client import check_publishable
from .options import ReadOptions, WriteOptions, parse_read_options, parse_write_options
from .schema import check_read_schema, check_write_schema, read_schema

NAME = "tubemq"


class TubeMQDataSource(DataSource):
    """Batch and streaming reads and writes of Apache InLong TubeMQ topics.

    Register it with ``spark.dataSource.register(TubeMQDataSource)``, or rely on PySpark's
    automatic discovery of the top-level ``pyspark_tubemq`` module (``DefaultSource``).
    """

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        opts = parse_read_options(self.options, streaming=None)
        if opts.value_format == "inlongmsg":
            from . import inlong

            return inlong.read_schema()
        return read_schema(opts.include_attributes, opts.include_headers)

    def reader(self, schema: StructType) -> DataSourceReader:
        opts = parse_read_options(self.options, streaming=False)
        _check_read_schema(schema, opts)
        from .reader import TubeMQBatchReader

        return TubeMQBatchReader(opts, schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        opts = parse_read_options(self.options, streaming=True)
        _check_read_schema(schema, opts)
        from .stream import TubeMQStreamReader

        return TubeMQStreamReader(opts, schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        opts, used = _write_options(self.options, schema, overwrite, "mode", ".mode('append')")
        from .writer import TubeMQBatchWriter

        return TubeMQBatchWriter(opts, used)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        opts, used = _write_options(self.options, schema, overwrite, "outputMode", ".outputMode('append')")
        from .writer import TubeMQStreamWriter

        return TubeMQStreamWriter(opts, used)


def _check_read_schema(schema: StructType, opts: ReadOptions) -> None:
    if opts.value_format == "inlongmsg":
        from . import inlong

        inlong.check_read_schema(schema)
    else:
        check_read_schema(schema, opts.include_attributes)


def _check_write_schema(schema: StructType, opts: WriteOptions) -> dict[str, str]:
    if opts.value_format == "inlongmsg":
        from . import inlong

        return inlong.check_write_schema(schema, opts.topic)
    return check_write_schema(schema, opts.topic)


def _write_options(
    options: Mapping[str, str], schema: StructType, overwrite: bool, option: str, fix: str,
) -> tuple[WriteOptions, dict[str, str]]:
    """The batch and the streaming writer's driver-side checks, in one order: append-only, the options,
    the DataFrame's columns, then whether the topic takes publishes."""
    if overwrite:
        raise ConfigError(option, f"TubeMQ topics are append-only logs and cannot be overwritten; use {fix}")
    opts = parse_write_options(options)
    used = _check_write_schema(schema, opts)
    check_publishable(opts)
    return opts, used
