"""SIGKILL of the server mid-produce loses no acknowledged message; consumer-group churn (joins,
leaves, SIGKILLed member processes) never has a partition held by two members and delivers every
acknowledged message. The long versions are in ``bench/soak.py``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from _support import needs_sigkill

from .scenarios import consumer_churn, kill_mid_produce


@needs_sigkill
def test_sigkill_mid_produce_loses_no_acknowledged_message(tmp_path: Path) -> None:
    res = kill_mid_produce(tmp_path, messages=4000, kill_after=1500)
    assert res.acked >= 1500, res
    assert res.untyped_errors == 0, res
    assert res.lost == 0, f"{res.lost} acknowledged message(s) missing after the restart: {res}"
    assert res.duplicates == 0, res


@needs_sigkill
def test_consumer_group_churn_never_holds_a_partition_twice(cluster: Any) -> None:
    cluster.create_topic("churn_t", partitions=6)
    res = consumer_churn(cluster.master_address, "churn_t", seconds=12, members=3, seed=3)
    assert res.samples > 20 and res.joins >= 3 and res.kills >= 1, res
    assert res.held_twice == 0, res
    assert res.missing == 0, f"{res.missing} acknowledged message(s) never delivered: {res}"
