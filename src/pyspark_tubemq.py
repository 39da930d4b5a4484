"""Automatic registration of the TubeMQ data source with PySpark (``format("tubemq")``).

PySpark (>= 4.0) scans ``sys.path`` for top-level modules whose name starts with ``pyspark_`` the
first time a Python data source is looked up, imports them and registers ``DefaultSource`` (a
``pyspark.sql.datasource.DataSource`` subclass) under ``DefaultSource.name()`` -- here
``"tubemq"`` (see ``pyspark/sql/worker/lookup_data_sources.py``). Installing ``tubemq[spark]`` is
therefore enough; ``spark.dataSource.register(tubemq.spark.TubeMQDataSource)`` does the same
explicitly (needed only when the module is not importable by Spark's Python workers).

This module is imported by that scan for every Spark application on the machine, so it never
raises: without PySpark or with a broken installation it simply exposes no ``DefaultSource``
(and logs why), leaving Spark's other data sources unaffected.
"""

from __future__ import annotations

import logging

__all__ = ["DefaultSource"]

try:
    from tubemq.spark._compat import require_pyspark

    require_pyspark()
    from tubemq.spark.source import TubeMQDataSource as DefaultSource
except ImportError as _exc:  # SparkUnavailableError is an ImportError too
    logging.getLogger("tubemq.spark").warning("TubeMQ Spark data source unavailable: %s", _exc)
    __all__ = []
