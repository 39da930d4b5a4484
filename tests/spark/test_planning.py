"""Planning-time pieces of the Spark source that need no JVM: options, offsets, rate limiting, schema."""

from __future__ import annotations

import datetime as dt
import json
import pkgutil
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from tubemq.errors import ConfigError
from tubemq.spark import SparkUnavailableError, require_pyspark
from tubemq.spark.offsets import (
    ENTRY_SIZE,
    flatten,
    nest,
    parse_offsets_option,
    parse_partition_key,
    rate_limit,
    to_json,
)
from tubemq.spark.options import parse_read_options, parse_write_options, starting_for

BASE = {"tubemq.master": "127.0.0.1:8715", "subscribe": "topic-a"}


def read_opts(streaming: bool | None = None, **extra: str):
    return parse_read_options({**BASE, **extra}, streaming=streaming)


def config_error(fn, *args, **kwargs) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        fn(*args, **kwargs)
    return info.value


# ---- read options


def test_read_defaults_follow_kafka() -> None:
    o = read_opts()
    assert o.topics == ("topic-a",)
    assert o.assign is None
    assert starting_for(o, streaming=False) == "earliest"
    assert starting_for(o, streaming=True) == "latest"
    assert o.ending == "latest"
    assert o.fail_on_data_loss is True
    assert o.include_attributes is False
    assert o.max_offsets_per_trigger is None
    assert o.client_options == {}


def test_option_names_are_case_insensitive_like_spark() -> None:
    # Spark lower-cases option keys before the source sees them.
    o = parse_read_options(
        {
            "TUBEMQ.MASTER": "h:1",
            "Subscribe": "a, b ,a",
            "includeattributes": "TRUE",
            "maxoffsetspertrigger": "7",
        },
        streaming=True,
    )
    assert o.topics == ("a", "b")
    assert o.include_attributes is True
    assert o.max_offsets_per_trigger == 7


@pytest.mark.parametrize(
    ("options", "field", "text"),
    [
        ({"subscribe": "a"}, "tubemq.master", "required"),
        ({"tubemq.master": "nohostport", "subscribe": "a"}, "tubemq.master", "host:port"),
        ({"tubemq.master": "h:1"}, "subscribe", "is required"),
        ({**BASE, "assign": '{"a": [0]}'}, "subscribe", "not both"),
        ({**BASE, "subscribe": "1bad"}, "subscribe", "invalid topic name"),
        ({"tubemq.master": "h:1", "assign": "{nope"}, "assign", "not valid JSON"),
        ({"tubemq.master": "h:1", "assign": '{"a": []}'}, "assign", "non-empty list"),
        ({"tubemq.master": "h:1", "assign": '{"a": ["x:y"]}'}, "assign", "brokerId:partitionId"),
        ({**BASE, "startingOffsets": "yesterday"}, "startingOffsets", "'earliest', 'latest' or JSON"),
        ({**BASE, "startingOffsets": '{"topic-a": {"1:0": 30}}'}, "startingOffsets", "multiples of 28"),
        ({**BASE, "startingOffsets": '{"topic-b": {"1:0": 28}}'}, "startingOffsets", "not read"),
        ({**BASE, "startingOffsets": '{"topic-a": {"1:0": "x"}}'}, "startingOffsets", "must be an integer"),
        ({**BASE, "endingOffsets": "earliest"}, "endingOffsets", "not allowed"),
        ({**BASE, "failOnDataLoss": "maybe"}, "failOnDataLoss", "'true' or 'false'"),
        ({**BASE, "maxOffsetsPerTrigger": "0"}, "maxOffsetsPerTrigger", "must be in"),
        ({**BASE, "maxOffsetsPerTrigger": "ten"}, "maxOffsetsPerTrigger", "integer"),
        ({**BASE, "pollTimeoutMs": "5"}, "pollTimeoutMs", "must be in"),
        ({**BASE, "streamIds": '{"other": ["s"]}'}, "streamIds", "not read"),
        ({**BASE, "streamIds": "a=b"}, "streamIds", "bad stream id"),
        ({**BASE, "msgTimeZone": "Mars/Olympus"}, "msgTimeZone", "unknown time zone"),
        ({**BASE, "groupIdPrefix": "9x"}, "groupIdPrefix", "start with a letter"),
        ({**BASE, "startingOffset": "earliest"}, "startingoffset", "did you mean 'startingOffsets'"),
        ({**BASE, "tubemq.no_such_setting": "1"}, "tubemq.no_such_setting", "not a consumer setting"),
        ({**BASE, "tubemq.rpc_timeout_ms": "1"}, "tubemq.rpc_timeout_ms", "3000"),
        ({**BASE, "tubemq.rpcTimeoutMs": "soon"}, "tubemq.rpctimeoutms", "bad value"),
        ({**BASE, "tubemq.group": "g"}, "tubemq.group", "managed by the source"),
    ],
)
def test_bad_read_options_name_the_option(options: dict[str, str], field: str, text: str) -> None:
    err = config_error(parse_read_options, options)
    assert err.field == field
    assert field in str(err)
    assert text in str(err)


def test_mode_specific_read_options() -> None:
    assert config_error(read_opts, False, startingOffsets="latest").field == "startingOffsets"
    assert config_error(read_opts, True, endingOffsets="latest").field == "endingOffsets"
    assert config_error(read_opts, False, maxOffsetsPerTrigger="10").field == "maxOffsetsPerTrigger"
    assert config_error(read_opts, False, commitOffsetsToGroup="dash").field == "commitOffsetsToGroup"
    # -1 (latest) inside JSON is a batch start that reads nothing, too
    err = config_error(read_opts, False, startingOffsets='{"topic-a": {"1:0": -1}}')
    assert err.field == "startingOffsets"
    assert read_opts(True, startingOffsets="latest", commitOffsetsToGroup="dash").commit_group == "dash"


def test_client_options_are_typed_and_validated() -> None:
    o = read_opts(**{"tubemq.rpcTimeoutMs": "5000", "tubemq.tls": "false", "tubemq.fetch_concurrency": "2"})
    assert o.client_options == {"rpc_timeout_ms": 5000, "tls": False, "fetch_concurrency": 2}
    w = parse_write_options({"tubemq.master": "h:1", "topic": "t", "tubemq.max_pending": "100"})
    assert w.client_options == {"max_pending": 100}
    assert config_error(
        parse_write_options, {"tubemq.master": "h:1", "tubemq.fetch_concurrency": "2"}
    ).field == ("tubemq.fetch_concurrency")


def test_assign_and_stream_ids() -> None:
    o = parse_read_options(
        {"tubemq.master": "h:1", "assign": '{"b": ["1:10001", 2], "a": ["2:0"]}', "streamIds": "s1,s2"}
    )
    assert o.topics == ("a", "b")
    assert dict(o.assign) == {"a": ("2:0",), "b": ("*:2", "1:10001")}
    assert o.wants("b", "1:10001") and not o.wants("b", "1:0")
    assert o.topic_filters() == {"a": ["s1", "s2"], "b": ["s1", "s2"]}
    o2 = read_opts(streamIds='{"topic-a": ["x"]}')
    assert o2.topic_filters() == {"topic-a": ["x"]}
    err = config_error(
        parse_read_options,
        {"tubemq.master": "h:1", "assign": '{"a": ["1:0"]}', "startingOffsets": '{"a": {"1:1": 0}}'},
    )
    assert err.field == "startingOffsets" and "not in 'assign'" in str(err)


def test_write_options() -> None:
    w = parse_write_options(
        {"tubemq.master": "h:1", "topic": "out", "stampAttributes": "true", "path": "ignored"}
    )
    assert (w.topic, w.stamp_attributes, w.flush_timeout_ms) == ("out", True, 120000)
    assert parse_write_options({"tubemq.master": "h:1"}).topic is None  # may come from a column
    assert config_error(parse_write_options, {"tubemq.master": "h:1", "topic": "a b"}).field == "topic"
    assert config_error(parse_write_options, {"tubemq.master": "h:1", "flushTimeoutMs": "-1"}).field == (
        "flushTimeoutMs"
    )


def test_options_pickle() -> None:
    import pickle

    o = read_opts(startingOffsets='{"topic-a": {"1:0": 56}}', **{"tubemq.rpc_timeout_ms": "4000"})
    assert pickle.loads(pickle.dumps(o)) == o


# ---- offsets model


def test_offsets_json_round_trip_is_stable() -> None:
    flat = {("b", "1:10"): 56, ("a", "1:2"): 28, ("a", "1:10"): 0, ("b", "2:1"): 280}
    nested = nest(flat)
    assert list(nested) == ["a", "b"]
    assert list(nested["a"]) == ["1:2", "1:10"]  # numeric order, not text order
    assert flatten(json.loads(to_json(flat))) == flat
    assert to_json(dict(reversed(list(flat.items())))) == to_json(flat)


@pytest.mark.parametrize("bad", [[], {"t": []}, {"t": {"x": 1}}, {"t": {"1:0": -5}}, {"t": {"1:0": True}}])
def test_flatten_rejects_malformed_checkpoints(bad: object) -> None:
    with pytest.raises(ValueError):
        flatten(bad)  # type: ignore[arg-type]


def test_partition_keys() -> None:
    assert parse_partition_key(" 1:10002 ") == (1, 10002)
    for bad in ("1", "a:1", "1:b", "", "1:2:3"):
        with pytest.raises(ValueError):
            parse_partition_key(bad)


def test_offsets_option_sentinels() -> None:
    spec = parse_offsets_option("x", '{"t": {"1:0": -2, "1:1": -1, "1:2": 2800}}', default="earliest")
    assert spec == {"t": {"1:0": -2, "1:1": -1, "1:2": 2800}}
    assert parse_offsets_option("x", None, default="latest") == "latest"
    assert parse_offsets_option("x", " EARLIEST ", default="latest") == "earliest"


def tp(i: int) -> tuple[str, str]:
    """Partition ``i`` alone in store ``i`` (ids ``store * 10000 + local``): one message per entry."""
    return ("t", f"1:{i * 10000}")


def sibling(i: int, store: int = 0) -> tuple[str, str]:
    """Partition ``i`` of a shared store: the siblings' messages interleave in one index."""
    return ("t", f"1:{store * 10000 + i}")


def test_rate_limit_takes_everything_under_budget() -> None:
    start = {tp(0): 0, tp(1): 280}
    latest = {tp(0): 28 * 5, tp(1): 280 + 28 * 3}
    assert rate_limit(start, latest, 100) == latest


def test_rate_limit_is_proportional_bounded_and_deterministic() -> None:
    start = {tp(0): 0, tp(1): 0, tp(2): 0}
    latest = {tp(0): 28 * 700, tp(1): 28 * 200, tp(2): 28 * 100}
    end = rate_limit(start, latest, 100)
    taken = {k: (end[k] - start[k]) // ENTRY_SIZE for k in end}
    assert sum(taken.values()) == 100
    assert taken == {tp(0): 70, tp(1): 20, tp(2): 10}
    assert all((end[k] - start[k]) % ENTRY_SIZE == 0 for k in end)
    assert rate_limit(start, latest, 100) == end


def test_rate_limit_always_progresses_and_never_overshoots() -> None:
    start = {tp(i): 28 * i for i in range(7)}
    latest = {tp(i): 28 * i + 28 * (i + 1) for i in range(7)}  # backlogs 1..7 entries (28 total)
    for budget in (1, 2, 3, 5, 27):
        end = rate_limit(start, latest, budget)
        moved = sum((end[k] - start[k]) // ENTRY_SIZE for k in end)
        assert moved == budget
        assert all(start[k] <= end[k] <= latest[k] for k in end)
    # walking to the end in budget-sized steps reaches latest exactly, in ceil(28/3) steps
    cur, steps = dict(start), 0
    while cur != latest and steps < 100:
        cur = rate_limit(cur, latest, 3)
        steps += 1
    assert cur == latest and steps == 10


def test_rate_limit_keeps_partitions_without_backlog() -> None:
    start = {tp(0): 56, tp(1): 56}
    end = rate_limit(start, {tp(0): 56, tp(1): 28}, 10)  # nothing new; one even behind (truncated)
    assert end == start


def test_rate_limit_counts_messages_of_a_shared_store_once() -> None:
    """Three siblings at one position, 300 entries waiting (about 100 each): a budget of 90 moves
    all three to a common end 90 entries on, i.e. exactly 90 messages between them (each entry is one
    sibling's message), not 90 entries each (up to 270 rows) nor 30 each (about 30 rows)."""
    start = {sibling(i): 280 for i in range(3)}
    latest = {sibling(i): 280 + 28 * 300 for i in range(3)}
    end = rate_limit(start, latest, 90)
    assert end == {sibling(i): 280 + 28 * 90 for i in range(3)}
    # walking on, each batch is 90 entries of the store until the last, and it ends exactly at latest
    cur, steps = dict(start), 0
    while cur != latest and steps < 100:
        nxt = rate_limit(cur, latest, 90)
        assert max(nxt.values()) - min(cur.values()) <= 28 * 90
        cur, steps = nxt, steps + 1
    assert cur == latest and steps == 4


def test_rate_limit_shares_between_stores_and_handles_uneven_siblings() -> None:
    start = {sibling(0): 0, sibling(1): 28 * 10, tp(1): 0}  # store 0 shared, store 1 alone
    latest = {sibling(0): 28 * 100, sibling(1): 28 * 100, tp(1): 28 * 100}
    end = rate_limit(start, latest, 50)
    # the budget splits by the stores' backlogs (100 entries each), the siblings move to one end that
    # reads at most 25 entries of their index past the lower start
    assert end == {sibling(0): 28 * 25, sibling(1): 28 * 25, tp(1): 28 * 25}
    end = rate_limit({sibling(0): 0, sibling(1): 28 * 90, tp(1): 28 * 100}, latest, 10)
    assert end == {sibling(0): 28 * 10, sibling(1): 28 * 90, tp(1): 28 * 100}  # the lower one catches up
    two = {sibling(0): 28 * 100, sibling(1): 28 * 100}
    assert rate_limit({sibling(0): 56, sibling(1): 28 * 100}, two, 1) == {sibling(0): 84, sibling(1): 28 * 100}


# ---- schema


def test_read_schema_and_ddl() -> None:
    from tubemq.spark.schema import ddl, read_schema

    names = [f.name for f in read_schema(True).fields]
    assert names == [
        "value",
        "topic",
        "partition",
        "broker_id",
        "partition_id",
        "offset",
        "timestamp",
        "message_id",
        "stream_id",
        "attributes",
    ]
    assert read_schema(False).simpleString() == (
        "struct<value:binary,topic:string,partition:string,broker_id:int,partition_id:int,offset:bigint,"
        "timestamp:timestamp,message_id:bigint,stream_id:string>"
    )
    assert ddl(False).startswith("value BINARY, topic STRING")


def test_user_schema_may_name_a_subset_of_the_columns() -> None:
    from tubemq.spark.schema import check_read_schema, read_schema, struct_of

    check_read_schema(read_schema(False), False)
    check_read_schema(read_schema(True), False)  # naming attributes is enough, the option is not needed
    check_read_schema(struct_of([("OFFSET", "bigint"), ("value", "binary")]), False)
    check_read_schema(struct_of([("attributes", "map<string,string>")]), False)
    cases = [
        ([("value", "string")], "column 'value' is BINARY, not STRING"),
        ([("key", "binary")], "unknown column 'key'"),
        ([("value", "binary"), ("Value", "binary")], "appears twice"),
        ([("broker_id", "bigint")], "is INT, not BIGINT"),
        ([], "at least one column"),
    ]
    for columns, text in cases:
        err = config_error(check_read_schema, struct_of(columns), False)
        assert err.field == "schema" and text in str(err), str(err)
    assert "partition_id INT" in str(config_error(check_read_schema, struct_of([("x", "int")]), False))


def test_arrow_builder_builds_only_the_named_columns_in_their_order() -> None:
    from tubemq.spark.schema import ArrowBuilder, TimeParser, arrow_schema_for, read_schema, struct_of

    full = ArrowBuilder(arrow_schema_for(read_schema(True)), "UTC")
    columns = [("message_id", "bigint"), ("Value", "binary"), ("partition", "string"), ("timestamp", "timestamp"),
               ("attributes", "map<string,string>"), ("offset", "bigint")]
    subset = ArrowBuilder(arrow_schema_for(struct_of(columns)), "UTC")
    only_value = ArrowBuilder(arrow_schema_for(struct_of([("value", "binary")])), "UTC")
    chunks = [[_msg(1, 280, "202401020304"), _msg(2, 308, "202401020304")], [_msg(3, 1000, None, "s")]]
    for b in (full, subset, only_value):
        for chunk in chunks:
            b.extend(chunk)
        assert len(b) == 3
    whole = full.flush("t", 1, 0).to_pydict()
    part = subset.flush("t", 1, 0)
    assert part.schema.names == ["message_id", "Value", "partition", "timestamp", "attributes", "offset"]
    got = part.to_pydict()
    for name, _ in columns:
        assert got[name] == whole[name.lower()], name
    assert got["partition"] == ["1:t:0"] * 3 and got["offset"] == [280, 308, 1000]
    parse = TimeParser("UTC")
    assert [None if t is None else int(t.timestamp() * 10**6) for t in got["timestamp"]] == [
        parse("202401020304"), parse("202401020304"), None
    ]
    values = only_value.flush("t", 1, 0)
    assert values.schema.names == ["value"] and values.column(0).to_pylist() == [m.data for c in chunks for m in c]
    assert only_value.offset_parts == [] and only_value.ids == [] and len(only_value) == 0


def test_write_schema_checks() -> None:
    from pyspark.sql.types import BinaryType, IntegerType, MapType, StringType, StructField, StructType

    from tubemq.spark.schema import check_write_schema

    ok = StructType(
        [
            StructField("value", StringType()),
            StructField("topic", StringType()),
            StructField("attributes", MapType(StringType(), StringType())),
            StructField("x", IntegerType()),
        ]
    )
    assert check_write_schema(ok, None) == {
        "value": "string",
        "topic": "string",
        "attributes": "map<string,string>",
    }
    assert (
        config_error(check_write_schema, StructType([StructField("v", BinaryType())]), "t").field == "value"
    )
    assert (
        config_error(check_write_schema, StructType([StructField("value", BinaryType())]), None).field
        == "topic"
    )
    bad = StructType([StructField("value", IntegerType())])
    err = config_error(check_write_schema, bad, "t")
    assert err.field == "value" and "BINARY or STRING" in str(err)


def test_msg_time_parsing_and_formatting() -> None:
    from tubemq.spark.schema import TimeParser, format_msg_time

    utc = TimeParser("UTC")
    assert (
        utc("202401020304") == int(dt.datetime(2024, 1, 2, 3, 4, tzinfo=dt.timezone.utc).timestamp()) * 10**6
    )
    assert (
        utc("20240102030405")
        == int(dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc).timestamp()) * 10**6
    )
    assert utc("1700000000123") == 1700000000123000
    assert utc(None) is None and utc("") is None and utc("2024-01-02") is None and utc("202413990000") is None
    shanghai = TimeParser("Asia/Shanghai")
    assert utc("202401020304") - shanghai("202401020304") == 8 * 3600 * 10**6
    stamp = dt.datetime(2024, 1, 2, 3, 4, 59, tzinfo=dt.timezone.utc)
    assert format_msg_time(stamp, "UTC") == "202401020304"
    assert format_msg_time(stamp, "Asia/Shanghai") == "202401021104"


def test_arrow_builder_matches_spark_arrow_schema() -> None:
    from tubemq.codec import Message
    from tubemq.spark.schema import ArrowBuilder, arrow_schema_for, read_schema

    schema = arrow_schema_for(read_schema(True))
    b = ArrowBuilder(schema, "UTC")
    b.add(
        Message(
            "t",
            b"v1",
            {"k": "v", "$msgType$": "s1", "$msgTime$": "202401020304"},
            "s1",
            "202401020304",
            11,
            1,
            None,
            56,
        )
    )
    b.add(Message("t", b"v2", {}, None, None, 12, 0, None, 84))
    batch = b.flush("t", 1, 10002)
    assert batch.schema.equals(schema)
    rows = batch.to_pylist()
    assert (
        rows[0]["value"] == b"v1" and rows[0]["partition"] == "1:t:10002" and rows[0]["partition_id"] == 10002
    )
    assert rows[0]["attributes"] == [("k", "v")]  # system headers are columns, not attributes
    assert rows[0]["stream_id"] == "s1" and rows[0]["timestamp"].minute == 4
    assert rows[1]["timestamp"] is None and rows[1]["offset"] == 84 and rows[1]["message_id"] == 12
    assert len(b) == 0


# ---- packaging: lazy import, auto-discovery


def test_pyspark_tubemq_is_discoverable_like_pyspark_does() -> None:
    # the same scan as pyspark/sql/worker/lookup_data_sources.py
    from pyspark.sql.datasource import DataSource

    names = [m.name for m in pkgutil.iter_modules() if m.name.startswith("pyspark_")]
    assert "pyspark_tubemq" in names
    import pyspark_tubemq

    assert issubclass(pyspark_tubemq.DefaultSource, DataSource)
    assert pyspark_tubemq.DefaultSource.name() == "tubemq"

    from tubemq.spark import TubeMQDataSource

    assert pyspark_tubemq.DefaultSource is TubeMQDataSource


def test_require_pyspark_passes_here() -> None:
    assert require_pyspark().__version__ >= "4.2"


def test_missing_pyspark_gives_a_clear_error() -> None:
    code = textwrap.dedent(
        """
        import sys
        sys.modules["pyspark"] = None  # as if not installed
        import pyspark_tubemq                      # the discovery module must not raise
        assert not hasattr(pyspark_tubemq, "DefaultSource")
        from tubemq.spark.options import parse_read_options   # planning helpers work without Spark
        parse_read_options({"tubemq.master": "h:1", "subscribe": "t"})
        import tubemq.spark
        try:
            tubemq.spark.TubeMQDataSource
        except ImportError as exc:
            print(type(exc).__name__, exc)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "SparkUnavailableError" in out.stdout and "pip install 'tubemq[spark]'" in out.stdout
    assert issubclass(SparkUnavailableError, ImportError)


def _msg(mid: int, offset: int, msg_time: str | None, stream: str | None = None) -> Any:
    from tubemq.codec import Message

    attrs = {"$msgTime$": msg_time} if msg_time else {}
    return Message("t", b"v%d" % mid, attrs, stream, msg_time, mid, 0, None, offset)


def test_arrow_builder_runs_and_fallbacks_give_per_message_values() -> None:
    """Offsets and msgTime are kept as runs when chunks are runs; gaps, -1 offsets and mixed minutes
    fall back to per-message values; every row must carry its own message's values either way."""
    from tubemq.spark.schema import ArrowBuilder, TimeParser, arrow_schema_for, read_schema

    schema = arrow_schema_for(read_schema(False))
    chunks = [
        [_msg(1, 280, "202401020304"), _msg(2, 308, "202401020304"), _msg(3, 336, "202401020304")],  # runs
        [_msg(4, 1000, "202401020305"), _msg(5, 1056, "202401020305")],  # a gap (dropped message): list
        [_msg(6, -1, None), _msg(7, -1, "202401020306")],  # no offsets, mixed times: lists
        [_msg(8, 5600, None, "s")],  # a single message is a run
        [],
    ]
    b = ArrowBuilder(schema, "UTC")
    for chunk in chunks:
        b.extend(chunk)
    batch = b.flush("t", 1, 0)
    assert batch.schema.equals(schema) and batch.num_rows == 8 and len(b) == 0
    parse = TimeParser("UTC")
    msgs = [m for chunk in chunks for m in chunk]
    got = batch.to_pydict()
    assert got["offset"] == [m.offset for m in msgs]
    assert got["message_id"] == [m.message_id for m in msgs]
    assert got["value"] == [m.data for m in msgs]
    assert got["stream_id"] == [None] * 7 + ["s"]
    stamps = [None if t is None else int(t.timestamp() * 10**6) for t in got["timestamp"]]
    assert stamps == [parse(m.msg_time) for m in msgs]

    # one minute over several chunks: a constant column; an empty flush is a valid empty batch
    for base in (0, 2800):
        b.extend([_msg(base + i, base + 28 * i, "202401020304") for i in range(3)])
    one = b.flush("t", 1, 0).to_pydict()
    assert one["offset"] == [0, 28, 56, 2800, 2828, 2856] and len(set(one["timestamp"])) == 1
    assert b.flush("t", 1, 0).num_rows == 0


def test_resume_dedup_skips_only_already_returned_messages() -> None:
    from tubemq.spark.task import _RESUME_WINDOW, _Dedup

    d = _Dedup()
    first = [_msg(i, 28 * i, None) for i in range(5)]
    d.remember(first)
    assert d.fresh(first) is first  # not resuming: nothing dropped, no copy
    d.resume()
    again = [_msg(i, 28 * i, None) for i in range(3, 8)]  # a reconnect re-reads ids 3 and 4
    assert [m.message_id for m in d.fresh(again)] == [5, 6, 7]
    assert [m.message_id for m in d.fresh([_msg(3, 0, None)])] == [3]  # skipping ended at the first new one
    # the window stays bounded: old fetched lists are dropped once newer ones cover it
    for k in range(4):
        d.remember([_msg(10_000 + k, 0, None)] * (_RESUME_WINDOW // 2))
    assert d.kept <= _RESUME_WINDOW + _RESUME_WINDOW // 2 and len(d.chunks) <= 3


def test_discovery_and_planning_imports_stay_light() -> None:
    """Spark restarts Python workers idle for a minute and every planning call may land in a fresh one:
    the discovery module must not drag in PyArrow or the asyncio client, and a missing PyArrow is still
    reported as SparkUnavailableError."""
    code = textwrap.dedent(
        """
        import sys
        import pyspark_tubemq
        heavy = sorted(m for m in ("pyarrow", "asyncio", "tubemq.spark.reader", "tubemq.spark.writer",
                                   "tubemq.spark.stream", "tubemq.spark.inlong") if m in sys.modules)
        print("heavy", heavy)
        from tubemq.spark.source import TubeMQDataSource
        ds = TubeMQDataSource({"tubemq.master": "h:1", "subscribe": "t"})
        reader = ds.reader(ds.schema())
        print("reader", type(reader).__name__)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "heavy []" in out.stdout and "reader TubeMQBatchReader" in out.stdout
    code = textwrap.dedent(
        """
        import sys
        sys.modules["pyarrow"] = None  # as if not installed
        from tubemq.spark import require_pyspark, SparkUnavailableError
        try:
            require_pyspark()
        except SparkUnavailableError as exc:
            print("unavailable", exc)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "unavailable tubemq.spark needs PyArrow" in out.stdout
