"""Spark test helpers (the Spark session and the shared cluster are fixtures in tests/spark/conftest.py)."""

from __future__ import annotations

from typing import Any


def read_df(spark: Any, master: str, topic: str, schema: str | None = None, **options: str) -> Any:
    """A batch DataFrame of ``topic`` through the tubemq source, with extra reader ``options``."""
    reader = spark.read.format("tubemq").option("tubemq.master", master).option("subscribe", topic)
    if schema is not None:
        reader = reader.schema(schema)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()
