"""``timestamps.resolve`` without a Spark JVM: the brokers' time look-up where there is one (the
embedded server), the search over the messages' msgTime where a broker has none (a real one: the
embedded server with ``time_lookup=False`` answers as it does)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _support import embedded_cluster

import tubemq
from tubemq.spark._client import all_bounds, close_quietly, discover, new_group, open_consumer
from tubemq.spark.options import parse_read_options
from tubemq.spark.timestamps import resolve

EARLY, LATE = "202601011200", "202601011201"


def _ms(minute: str, seconds: int = 0) -> int:
    return int(dt.datetime.strptime(minute, "%Y%m%d%H%M").timestamp() * 1000) + seconds * 1000


@pytest.fixture(params=[True, False], ids=["lookup", "no-lookup"])
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Any, bool, list[int]]]:
    """A cluster with one 1-partition topic: 3 messages of minute EARLY, then 4 of minute LATE."""
    with embedded_cluster(tmp_path / "d", time_lookup=request.param) as c:
        c.create_topic("ts_fb", partitions=1)
        with tubemq.Producer(c.master_address) as prod:
            offsets = [prod.send("ts_fb", b"m%d" % i, msg_time=EARLY if i < 3 else LATE).append_offset
                       for i in range(7)]
        yield c, request.param, offsets


def _plan(c: Any, **extra: str) -> tuple[Any, dict[tuple[str, str], tuple[int, int]]]:
    opts = parse_read_options({"tubemq.master": c.master_address, "subscribe": "ts_fb", "adminUrl": c.admin_url,
                               "startingTimestamp": "0", **extra}, streaming=False)
    consumer = open_consumer(opts, new_group(opts.group_prefix, "plan"))
    try:
        limits = all_bounds(consumer, discover(consumer, opts, strict=True), opts)
    finally:
        close_quietly(consumer, "the test's planning consumer")
    return opts, limits


def test_resolve_falls_back_to_the_msg_time_search(served: tuple[Any, bool, list[int]]) -> None:
    c, lookup, offsets = served
    opts, limits = _plan(c)
    assert list(limits) == [("ts_fb", "1:0")]
    when = _ms(LATE, 30)
    start = resolve(opts, when, limits, ending=False)
    end = resolve(opts, {"ts_fb": {"*:0": when}}, limits, ending=True)
    if lookup:  # the append times: every message was appended now, after ``when``
        assert start == end == {("ts_fb", "1:0"): offsets[0]}
    else:  # the producers' minutes: the first message of LATE
        assert start == end == {("ts_fb", "1:0"): offsets[3]}
        assert offsets[3] > offsets[0]
        # before every message: the first; after every one: the latest offset (an ending time) ...
        assert resolve(opts, _ms(EARLY) - 60_000, limits, ending=False) == {("ts_fb", "1:0"): offsets[0]}
        assert resolve(opts, _ms(LATE) + 3_600_000, limits, ending=True) == {("ts_fb", "1:0"): limits["ts_fb", "1:0"][1]}
        # ... and for a starting time an error unless the strategy says latest, as with the look-up
        with pytest.raises(tubemq.errors.TubeMQError, match="no message at or after"):
            resolve(opts, _ms(LATE) + 3_600_000, limits, ending=False)
