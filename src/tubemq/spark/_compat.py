"""The optional PySpark dependency: imported lazily so ``import tubemq`` never needs Spark.

The data source classes subclass ``pyspark.sql.datasource`` types, so they can only be defined once
PySpark is importable; everything that is pure planning (options, offsets) lives in modules that do
not import PySpark, so it can be used and tested anywhere.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

from .._imports import install_hint
from ..errors import TubeMQError

#: Oldest PySpark with the parts of the Python Data Source API we use (admission control, ReadLimit,
#: SupportsTriggerAvailableNow, Arrow writers).
MIN_PYSPARK = (4, 2)

_INSTALL_HINT = install_hint("spark")


class SparkUnavailableError(TubeMQError, ImportError):
    """PySpark or PyArrow is missing or too old for ``tubemq.spark``."""


class TubeMQSparkError(TubeMQError):
    """A failure inside the Spark source or sink; the message is self-explanatory on purpose.

    Spark re-raises worker exceptions as ``PythonException`` carrying only the text, so the text
    names the topic, partition, offsets and the underlying cause.
    """


def _version_tuple(text: str) -> tuple[int, int]:
    parts = []
    for piece in text.split(".")[:2]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    while len(parts) < 2:
        parts.append(0)
    return parts[0], parts[1]


def require_pyspark() -> Any:
    """Import and return ``pyspark``; raise :class:`SparkUnavailableError` with the fix when unusable."""
    try:
        pyspark = importlib.import_module("pyspark")
    except ImportError as exc:
        raise SparkUnavailableError(
            f"tubemq.spark needs PySpark, which is not installed; {_INSTALL_HINT}"
        ) from exc
    version = getattr(pyspark, "__version__", "0")
    if _version_tuple(version) < MIN_PYSPARK:
        raise SparkUnavailableError(
            f"tubemq.spark needs PySpark >= {MIN_PYSPARK[0]}.{MIN_PYSPARK[1]} (Python Data Source API with "
            f"admission control), found {version}; {_INSTALL_HINT}"
        )
    # located, not imported: Spark's planning workers never need it, and it costs them a fresh import
    # each time Spark restarts an idle worker; the read and write paths import it where they use it
    try:
        found = importlib.util.find_spec("pyarrow") is not None
    except (ImportError, ValueError):  # a broken or blocked installation
        found = False
    if not found:
        raise SparkUnavailableError(f"tubemq.spark needs PyArrow, which is not installed; {_INSTALL_HINT}")
    return pyspark
