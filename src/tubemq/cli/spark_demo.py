"""The Spark part of ``tubemq demo --spark`` (filled in when tubemq.spark lands)."""

from __future__ import annotations

from typing import Any

from .common import CliError


def run_spark_demo(master: str, topic: str, events: int, *, partitions: int = 4) -> dict[str, Any]:
    raise CliError("--spark: the Spark data source (tubemq.spark) is not available in this build")
