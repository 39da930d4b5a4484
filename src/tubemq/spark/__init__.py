"""PySpark data source for TubeMQ: ``spark.read/readStream.format("tubemq")``, ``df.write/writeStream``.

Needs the ``spark`` extra (``pip install 'pyspark>=4.2' 'pyarrow>=15'``, or ``tubemq[spark]``). PySpark is
imported only when a data source class is first used, so importing :mod:`tubemq.spark` (and the
option/offset helpers) works without it; a missing or too old PySpark raises
:class:`SparkUnavailableError` (an ``ImportError``) explaining how to install it.

Usage::

    from tubemq.spark import TubeMQDataSource
    spark.dataSource.register(TubeMQDataSource)      # optional: pyspark_tubemq is auto-discovered
    df = (spark.read.format("tubemq").option("tubemq.master", "host:8715")
          .option("subscribe", "topic-a").load())

See :mod:`tubemq.spark.offsets` for the offsets model and its at-least-once boundaries.
"""

from __future__ import annotations

from typing import Any

from .._imports import load_lazy
from ._compat import SparkUnavailableError, TubeMQSparkError, require_pyspark

_LAZY = {
    "TubeMQDataSource": "tubemq.spark.source",
    "TubeMQBatchReader": "tubemq.spark.reader",
    "TubeMQInputPartition": "tubemq.spark.reader",
    "TubeMQStreamReader": "tubemq.spark.stream",
    "TubeMQBatchWriter": "tubemq.spark.writer",
    "TubeMQStreamWriter": "tubemq.spark.writer",
    "TubeMQCommitMessage": "tubemq.spark.writer",
}


def __getattr__(name: str) -> Any:
    return load_lazy("tubemq.spark", _LAZY, globals(), name, require_pyspark)


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_LAZY))


__all__ = ["SparkUnavailableError", "TubeMQSparkError", "require_pyspark", *_LAZY]
