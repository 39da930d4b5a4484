"""Options of ``format("tubemq")``: parsed and validated at planning time, never on the executors.

Spark hands a data source its options as a case-insensitive map with lower-cased keys; this module
accepts any mapping, matches names case-insensitively, and turns the strings into frozen, picklable
dataclasses (:class:`ReadOptions`, :class:`WriteOptions`). Every bad or missing value raises
:class:`tubemq.errors.ConfigError` whose ``field`` is the option name as the user spells it in the
documentation (``startingOffsets``, ``tubemq.master``, ...), so the message Spark shows names it.

Names follow Spark's Kafka source where they mean the same thing. Options starting with ``tubemq.``
(other than ``tubemq.master``) go to the client configuration (``ConsumerConfig`` for reads,
``ProducerConfig`` for writes): ``tubemq.rpc_timeout_ms`` and ``tubemq.rpcTimeoutMs`` both mean the
``rpc_timeout_ms`` field; values are converted by the field's type.

Spark Kafka options this source does not implement (``minOffsetsPerTrigger``, ``maxTriggerDelay``,
``subscribePattern``, ``kafka.*``...) are errors that say so: a ported job must not silently read
something else. ``kafkaConsumer.pollTimeoutMs`` is accepted as the Kafka name of ``pollTimeoutMs``.

Unknown options: a name close to a known one (a likely typo, e.g. ``startingOffset``) is an error;
anything else is ignored with a warning, because Spark itself passes options such as ``path`` or
``checkpointLocation`` to sources and sinks.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError
from .offsets import (
    OffsetSpec,
    TimestampSpec,
    parse_offsets_option,
    parse_partition_key,
    parse_timestamps_option,
)

log = logging.getLogger("tubemq.spark.options")

# ---- canonical option names (documentation spelling); matched case-insensitively

MASTER = "tubemq.master"
SUBSCRIBE = "subscribe"
ASSIGN = "assign"
STARTING_OFFSETS = "startingOffsets"
ENDING_OFFSETS = "endingOffsets"
MAX_OFFSETS_PER_TRIGGER = "maxOffsetsPerTrigger"
FAIL_ON_DATA_LOSS = "failOnDataLoss"
INCLUDE_ATTRIBUTES = "includeAttributes"
STREAM_IDS = "streamIds"
POLL_TIMEOUT_MS = "pollTimeoutMs"
NUM_RETRIES = "fetchOffset.numRetries"
RETRY_INTERVAL_MS = "fetchOffset.retryIntervalMs"
GROUP_ID_PREFIX = "groupIdPrefix"
COMMIT_OFFSETS_TO_GROUP = "commitOffsetsToGroup"
ARROW_BATCH_SIZE = "arrowBatchSize"
MSG_TIME_ZONE = "msgTimeZone"
TOPIC = "topic"
STAMP_ATTRIBUTES = "stampAttributes"
FLUSH_TIMEOUT_MS = "flushTimeoutMs"
VALUE_FORMAT = "valueFormat"
CAPACITY = "capacity"
COMPRESS = "compress"
STARTING_TIMESTAMP = "startingTimestamp"
STARTING_OFFSETS_BY_TIMESTAMP = "startingOffsetsByTimestamp"
STARTING_BY_TIMESTAMP_STRATEGY = "startingOffsetsByTimestampStrategy"
ENDING_TIMESTAMP = "endingTimestamp"
ENDING_OFFSETS_BY_TIMESTAMP = "endingOffsetsByTimestamp"
MIN_PARTITIONS = "minPartitions"
INCLUDE_HEADERS = "includeHeaders"
ADMIN_URL = "adminUrl"
#: Spark's Kafka name of ``pollTimeoutMs`` (same meaning: how long an executor waits for a fetch).
KAFKA_POLL_TIMEOUT_MS = "kafkaConsumer.pollTimeoutMs"
#: Spark Kafka source options this source does not implement: each is an error saying why, because
#: dropping one silently changes what a ported job reads.
KAFKA_UNSUPPORTED = {
    "subscribepattern": "subscribePattern is not supported: TubeMQ consumers subscribe to named topics; "
    "list them in 'subscribe'",
    "minoffsetspertrigger": "minOffsetsPerTrigger is not supported: the tubemq source never delays a "
    "micro-batch to wait for more data (it has maxOffsetsPerTrigger, an upper bound only)",
    "maxtriggerdelay": "maxTriggerDelay is not supported: it only goes with minOffsetsPerTrigger, which the "
    "tubemq source does not implement",
    "maxrecordsperpartition": "maxRecordsPerPartition is not supported: use minPartitions to split large "
    "partition ranges",
    "endingoffsetsbytimestampstrategy": "is not a Spark option; see startingOffsetsByTimestampStrategy",
}
TIMESTAMP_STRATEGIES = ("error", "latest")
#: ``valueFormat`` values: plain message bytes, or InLong containers exploded into records.
VALUE_FORMATS = ("raw", "inlongmsg")

CLIENT_PREFIX = "tubemq."

READ_OPTIONS = (
    MASTER,
    SUBSCRIBE,
    ASSIGN,
    STARTING_OFFSETS,
    ENDING_OFFSETS,
    MAX_OFFSETS_PER_TRIGGER,
    FAIL_ON_DATA_LOSS,
    INCLUDE_ATTRIBUTES,
    STREAM_IDS,
    POLL_TIMEOUT_MS,
    NUM_RETRIES,
    RETRY_INTERVAL_MS,
    GROUP_ID_PREFIX,
    COMMIT_OFFSETS_TO_GROUP,
    ARROW_BATCH_SIZE,
    MSG_TIME_ZONE,
    VALUE_FORMAT,
    STARTING_TIMESTAMP,
    STARTING_OFFSETS_BY_TIMESTAMP,
    STARTING_BY_TIMESTAMP_STRATEGY,
    ENDING_TIMESTAMP,
    ENDING_OFFSETS_BY_TIMESTAMP,
    MIN_PARTITIONS,
    INCLUDE_HEADERS,
    ADMIN_URL,
)
WRITE_OPTIONS = (MASTER, TOPIC, STAMP_ATTRIBUTES, FLUSH_TIMEOUT_MS, MSG_TIME_ZONE, VALUE_FORMAT, CAPACITY, COMPRESS)

#: Options Spark or users commonly pass to every source/sink; never warned about.
_SPARK_GENERIC = {"path", "paths", "checkpointlocation", "queryname", "__tubemq_test__"}

_TOPIC_RE = re.compile(r"^[A-Za-z][\w-]{0,63}$")
_GROUP_RE = re.compile(r"^[A-Za-z][\w-]{0,1023}$")
_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


# ---- small typed readers over the lower-cased map


class _Opts:
    """Lower-cased view of the user's options with typed getters that name the option on error."""

    def __init__(self, options: Mapping[str, Any]) -> None:
        self.raw: dict[str, str] = {}
        for key, value in dict(options).items():
            if not isinstance(key, str):
                raise ConfigError(str(key), "option names must be strings")
            self.raw[key.lower()] = "" if value is None else str(value)

    def has(self, name: str) -> bool:
        return name.lower() in self.raw

    def get(self, name: str) -> str | None:
        return self.raw.get(name.lower())

    def string(self, name: str, default: str | None = None) -> str | None:
        value = self.get(name)
        if value is None:
            return default
        value = value.strip()
        if not value:
            raise ConfigError(name, "must not be empty")
        return value

    def boolean(self, name: str, default: bool) -> bool:
        value = self.get(name)
        if value is None:
            return default
        low = value.strip().lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
        raise ConfigError(name, f"must be 'true' or 'false', got {value!r}")

    def integer(self, name: str, default: int | None, lo: int, hi: int) -> int | None:
        value = self.get(name)
        if value is None:
            return default
        try:
            number = int(value.strip())
        except ValueError:
            raise ConfigError(name, f"must be an integer, got {value!r}") from None
        if not lo <= number <= hi:
            raise ConfigError(name, f"must be in [{lo}, {hi}], got {number}")
        return number


# ---- parsed option sets


@dataclass(frozen=True)
class ReadOptions:
    """Validated read options (picklable: shipped to executors inside readers and partitions)."""

    master: str
    topics: tuple[str, ...]
    #: ``assign``: topic -> partition keys ``"brokerId:partitionId"``, or None for all partitions.
    assign: Mapping[str, tuple[str, ...]] | None
    #: None = not given: ``earliest`` for batch, ``latest`` for streaming (see :func:`starting_for`).
    starting: OffsetSpec | None
    ending: OffsetSpec
    max_offsets_per_trigger: int | None
    fail_on_data_loss: bool
    include_attributes: bool
    #: topic -> stream ids filtered on the broker (empty mapping = no filter).
    stream_ids: Mapping[str, tuple[str, ...]]
    poll_timeout_ms: int
    num_retries: int
    retry_interval_ms: int
    group_prefix: str
    commit_group: str | None
    arrow_batch_size: int
    msg_time_zone: str | None
    client_options: Mapping[str, Any] = field(default_factory=dict)
    #: ``raw``, or ``inlongmsg``: one row per record of each InLong container (tubemq.spark.inlong).
    value_format: str = "raw"
    #: ``startingTimestamp`` (epoch ms for every partition) or ``startingOffsetsByTimestamp``
    #: ({topic: {"brokerId:partitionId" or "*:partitionId": ms}}); they win over ``startingOffsets``.
    starting_timestamp: TimestampSpec | None = None
    ending_timestamp: TimestampSpec | None = None
    #: ``startingOffsetsByTimestampStrategy``: "error" or "latest" when a partition has no message
    #: at or after its starting timestamp.
    timestamp_strategy: str = "error"
    min_partitions: int | None = None
    #: ``includeHeaders``: a Kafka-style ``headers`` column (the attributes as key / UTF-8 bytes).
    include_headers: bool = False
    #: ``adminUrl``: the master's web API, which finds offsets by time (timestamp options need it).
    admin_url: str | None = None

    def topic_filters(self) -> dict[str, list[str]] | list[str]:
        """The ``topics`` argument for a consumer: a list, or a mapping when stream ids filter."""
        if not self.stream_ids:
            return list(self.topics)
        return {t: list(self.stream_ids.get(t, ())) for t in self.topics}

    def wants(self, topic: str, partition_key: str) -> bool:
        """Whether ``assign`` (if given) selects this partition."""
        if self.assign is None:
            return True
        return partition_key in self.assign.get(topic, ())


@dataclass(frozen=True)
class WriteOptions:
    """Validated write options."""

    master: str
    topic: str | None
    stamp_attributes: bool
    flush_timeout_ms: int
    msg_time_zone: str | None
    client_options: Mapping[str, Any] = field(default_factory=dict)
    #: ``inlongmsg``: rows are packed into InLong containers of about ``capacity`` bytes.
    value_format: str = "raw"
    capacity: int = 4096
    compress: bool = False


# ---- parsing


def parse_read_options(options: Mapping[str, Any], *, streaming: bool | None = None) -> ReadOptions:
    """Validate read options; ``streaming`` None = not known yet (``schema()`` time): check both ways.

    Defaults differ like Kafka's: ``startingOffsets`` is ``earliest`` for batch and ``latest`` for
    streaming; ``endingOffsets`` (batch only) defaults to ``latest``.
    """
    o = _Opts(options)
    if o.has(KAFKA_POLL_TIMEOUT_MS):
        if o.has(POLL_TIMEOUT_MS):
            raise ConfigError(KAFKA_POLL_TIMEOUT_MS, f"give {POLL_TIMEOUT_MS} or its Kafka name, not both")
        o.raw[POLL_TIMEOUT_MS.lower()] = o.raw.pop(KAFKA_POLL_TIMEOUT_MS.lower())
    _check_unknown(o, READ_OPTIONS, "read")
    master = _master(o)

    has_sub, has_assign = o.has(SUBSCRIBE), o.has(ASSIGN)
    if has_sub and has_assign:
        raise ConfigError(SUBSCRIBE, f"give exactly one of '{SUBSCRIBE}' and '{ASSIGN}', not both")
    if not has_sub and not has_assign:
        raise ConfigError(
            SUBSCRIBE,
            f"one of '{SUBSCRIBE}' (comma-separated topics) or '{ASSIGN}' "
            '(JSON like {"topic": ["1:0", "1:1"]}) is required',
        )
    assign: dict[str, tuple[str, ...]] | None = None
    if has_sub:
        topics = tuple(_topic_list(o.get(SUBSCRIBE) or "", SUBSCRIBE))
    else:
        assign = _parse_assign(o.get(ASSIGN) or "")
        topics = tuple(assign)

    starting: OffsetSpec | None = None
    if o.get(STARTING_OFFSETS) is not None:
        starting = parse_offsets_option(
            STARTING_OFFSETS, o.get(STARTING_OFFSETS), default="earliest", allow_latest=streaming is not False
        )
    if streaming and o.has(ENDING_OFFSETS):
        raise ConfigError(ENDING_OFFSETS, "is only for batch queries (spark.read); streaming reads never end")
    ending = parse_offsets_option(
        ENDING_OFFSETS, o.get(ENDING_OFFSETS), default="latest", allow_earliest=False
    )
    _check_offsets_topics(STARTING_OFFSETS, starting, topics, assign)
    _check_offsets_topics(ENDING_OFFSETS, ending, topics, assign)

    starting_ts = _timestamps(o, STARTING_TIMESTAMP, STARTING_OFFSETS_BY_TIMESTAMP, topics)
    ending_ts = _timestamps(o, ENDING_TIMESTAMP, ENDING_OFFSETS_BY_TIMESTAMP, topics)
    if streaming and ending_ts is not None:
        raise ConfigError(ENDING_TIMESTAMP if o.has(ENDING_TIMESTAMP) else ENDING_OFFSETS_BY_TIMESTAMP,
                          "is only for batch queries (spark.read); streaming reads never end")
    strategy = (o.string(STARTING_BY_TIMESTAMP_STRATEGY, "error") or "error").lower()
    if strategy not in TIMESTAMP_STRATEGIES:
        raise ConfigError(STARTING_BY_TIMESTAMP_STRATEGY, f"must be 'error' or 'latest', got {strategy!r}")
    admin_url = o.string(ADMIN_URL)
    if admin_url is not None and "://" not in admin_url:
        admin_url = "http://" + admin_url
    if (starting_ts is not None or ending_ts is not None) and admin_url is None:
        used = next(n for n in (STARTING_TIMESTAMP, STARTING_OFFSETS_BY_TIMESTAMP, ENDING_TIMESTAMP,
                                ENDING_OFFSETS_BY_TIMESTAMP) if o.has(n))
        raise ConfigError(ADMIN_URL, f"is required with {used}: the master's web API (e.g. http://master:8080) "
                          "is what finds the offsets of a time")
    include_headers = o.boolean(INCLUDE_HEADERS, False)
    if include_headers and (o.string(VALUE_FORMAT, "raw") or "raw").lower() != "raw":
        raise ConfigError(INCLUDE_HEADERS, "applies to valueFormat=raw only (InLong records carry their own attributes)")

    max_per_trigger = o.integer(MAX_OFFSETS_PER_TRIGGER, None, 1, 1 << 62)
    if streaming is False and max_per_trigger is not None:
        raise ConfigError(MAX_OFFSETS_PER_TRIGGER, "is only for streaming queries (spark.readStream)")

    stream_ids = _parse_stream_ids(o.get(STREAM_IDS), topics)
    group_prefix = o.string(GROUP_ID_PREFIX, "spark-tubemq") or "spark-tubemq"
    if not _GROUP_RE.match(group_prefix) or len(group_prefix) > 200:
        raise ConfigError(
            GROUP_ID_PREFIX,
            f"must start with a letter and hold only letters, digits, '_' or '-' (got {group_prefix!r})",
        )
    commit_group = o.string(COMMIT_OFFSETS_TO_GROUP)
    if commit_group is not None and not _GROUP_RE.match(commit_group):
        raise ConfigError(
            COMMIT_OFFSETS_TO_GROUP,
            f"must be a consumer group name (letter first, then letters, digits, '_' or '-'), got {commit_group!r}",
        )
    if streaming is False and commit_group is not None:
        raise ConfigError(COMMIT_OFFSETS_TO_GROUP, "is only for streaming queries (spark.readStream)")

    return ReadOptions(
        master=master,
        topics=topics,
        assign=assign,
        starting=starting,
        ending=ending,
        max_offsets_per_trigger=max_per_trigger,
        fail_on_data_loss=o.boolean(FAIL_ON_DATA_LOSS, True),
        include_attributes=o.boolean(INCLUDE_ATTRIBUTES, False),
        stream_ids=stream_ids,
        poll_timeout_ms=o.integer(POLL_TIMEOUT_MS, 30000, 100, 3600000) or 30000,
        num_retries=o.integer(NUM_RETRIES, 3, 0, 1000) or 0,
        retry_interval_ms=o.integer(RETRY_INTERVAL_MS, 500, 0, 600000) or 0,
        group_prefix=group_prefix,
        commit_group=commit_group,
        arrow_batch_size=o.integer(ARROW_BATCH_SIZE, 10000, 1, 10_000_000) or 10000,
        msg_time_zone=_time_zone(o),
        client_options=_client_options(o, master, "consumer"),
        value_format=_value_format(o),
        starting_timestamp=starting_ts,
        ending_timestamp=ending_ts,
        timestamp_strategy=strategy,
        min_partitions=o.integer(MIN_PARTITIONS, None, 1, 1_000_000),
        include_headers=include_headers,
        admin_url=admin_url,
    )


def _timestamps(o: _Opts, single: str, per_partition: str, topics: tuple[str, ...]) -> TimestampSpec | None:
    """Kafka's precedence: the single timestamp wins over the per-partition JSON."""
    if o.has(single):
        return o.integer(single, None, 0, 1 << 62)
    return parse_timestamps_option(per_partition, o.get(per_partition), topics)


def starting_for(opts: ReadOptions, streaming: bool) -> OffsetSpec:
    """The starting offsets of ``opts`` once batch/streaming is known (default differs)."""
    if opts.starting is not None:
        return opts.starting
    return "latest" if streaming else "earliest"


def parse_write_options(options: Mapping[str, Any]) -> WriteOptions:
    """Validate write options (the DataFrame's columns are checked separately, see ``schema``)."""
    o = _Opts(options)
    _check_unknown(o, WRITE_OPTIONS, "write")
    master = _master(o)
    topic = o.string(TOPIC)
    if topic is not None:
        _check_topic(topic, TOPIC)
    return WriteOptions(
        master=master,
        topic=topic,
        stamp_attributes=o.boolean(STAMP_ATTRIBUTES, False),
        flush_timeout_ms=o.integer(FLUSH_TIMEOUT_MS, 120000, 1, 24 * 3600 * 1000) or 120000,
        msg_time_zone=_time_zone(o),
        client_options=_client_options(o, master, "producer"),
        value_format=_value_format(o),
        capacity=o.integer(CAPACITY, 4096, 1, 64 * 1024 * 1024) or 4096,
        compress=o.boolean(COMPRESS, False),
    )


# ---- helpers


def _master(o: _Opts) -> str:
    value = o.get(MASTER)
    if value is None or not value.strip():
        raise ConfigError(MASTER, "is required: the TubeMQ master address list, e.g. 'host1:8715,host2:8715'")
    value = value.strip()
    if "://" not in value:
        for item in value.split(","):
            host, sep, port = item.strip().rpartition(":")
            if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ConfigError(MASTER, f"expected 'host:port[,host:port...]', got {value!r}")
    return value


def _check_topic(topic: str, option: str) -> None:
    if not _TOPIC_RE.match(topic):
        raise ConfigError(
            option, f"invalid topic name {topic!r}: a letter first, then up to 63 letters, digits, '_' or '-'"
        )


def _topic_list(text: str, option: str) -> list[str]:
    topics = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        _check_topic(item, option)
        if item not in topics:
            topics.append(item)
    if not topics:
        raise ConfigError(option, "must name at least one topic (comma-separated)")
    return topics


def _parse_assign(text: str) -> dict[str, tuple[str, ...]]:
    example = '{"topic-a": ["1:0", "1:1"], "topic-b": [0]} ("brokerId:partitionId", or a bare partitionId on any broker)'
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigError(ASSIGN, f"is not valid JSON ({exc}); expected {example}") from None
    if not isinstance(data, dict) or not data:
        raise ConfigError(ASSIGN, f"must be a non-empty JSON object; expected {example}")
    out: dict[str, tuple[str, ...]] = {}
    for topic in sorted(data):
        _check_topic(topic, ASSIGN)
        parts = data[topic]
        if not isinstance(parts, list) or not parts:
            raise ConfigError(
                ASSIGN, f"topic {topic!r} needs a non-empty list of partitions; expected {example}"
            )
        keys: list[str] = []
        for p in parts:
            if isinstance(p, bool):
                raise ConfigError(ASSIGN, f"bad partition {p!r} for topic {topic!r}")
            if isinstance(p, int):
                if p < 0:
                    raise ConfigError(ASSIGN, f"bad partition id {p} for topic {topic!r}")
                key = f"*:{p}"  # any broker
            elif isinstance(p, str):
                try:
                    b, pid = parse_partition_key(p)
                except ValueError as exc:
                    raise ConfigError(ASSIGN, f"topic {topic!r}: {exc}") from None
                key = f"{b}:{pid}"
            else:
                raise ConfigError(ASSIGN, f"bad partition {p!r} for topic {topic!r}; expected {example}")
            if key not in keys:
                keys.append(key)
        out[topic] = tuple(sorted(keys))
    return out


def assign_matches(
    assign: Mapping[str, tuple[str, ...]] | None, topic: str, broker_id: int, partition_id: int
) -> bool:
    """Whether partition ``broker_id:partition_id`` of ``topic`` is selected (``*:pid`` = any broker)."""
    if assign is None:
        return True
    keys = assign.get(topic, ())
    return f"{broker_id}:{partition_id}" in keys or f"*:{partition_id}" in keys


def _check_offsets_topics(
    option: str,
    spec: OffsetSpec | None,
    topics: tuple[str, ...],
    assign: Mapping[str, tuple[str, ...]] | None,
) -> None:
    if not isinstance(spec, dict):
        return
    for topic in spec:
        if topic not in topics:
            raise ConfigError(
                option, f"names topic {topic!r}, which is not read (topics: {', '.join(topics)})"
            )
        if assign is not None:
            for key in spec[topic]:
                b, p = (int(x) for x in key.split(":"))
                if not assign_matches(assign, topic, b, p):
                    raise ConfigError(
                        option, f"names partition {key} of topic {topic!r}, which is not in '{ASSIGN}'"
                    )


def _parse_stream_ids(text: str | None, topics: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    if text is None:
        return {}
    text = text.strip()
    if not text:
        raise ConfigError(STREAM_IDS, "must not be empty")
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ConfigError(STREAM_IDS, f"is not valid JSON ({exc})") from None
        if not isinstance(data, dict):
            raise ConfigError(STREAM_IDS, 'expected "s1,s2" or JSON like {"topic": ["s1", "s2"]}')
        out: dict[str, tuple[str, ...]] = {}
        for topic, ids in data.items():
            if topic not in topics:
                raise ConfigError(STREAM_IDS, f"names topic {topic!r}, which is not read")
            if not isinstance(ids, list) or not ids or not all(isinstance(i, str) and i.strip() for i in ids):
                raise ConfigError(STREAM_IDS, f"topic {topic!r} needs a non-empty list of stream id strings")
            out[topic] = tuple(sorted({_stream_id(i) for i in ids}))
        return out
    ids = tuple(sorted({_stream_id(i) for i in text.split(",") if i.strip()}))
    if not ids:
        raise ConfigError(STREAM_IDS, "must name at least one stream id")
    return {t: ids for t in topics}


def _stream_id(text: str) -> str:
    text = text.strip()
    if not text or any(c in text for c in ",=#:;'\" "):
        raise ConfigError(STREAM_IDS, f"bad stream id {text!r}")
    return text


def _value_format(o: _Opts) -> str:
    value = (o.string(VALUE_FORMAT, "raw") or "raw").lower()
    if value not in VALUE_FORMATS:
        raise ConfigError(VALUE_FORMAT, f"must be one of {', '.join(VALUE_FORMATS)} (got {value!r})")
    return value


def _time_zone(o: _Opts) -> str | None:
    name = o.string(MSG_TIME_ZONE)
    if name is None:
        return None
    try:
        import zoneinfo

        zoneinfo.ZoneInfo(name)
    except Exception:  # noqa: BLE001 - ZoneInfo raises several types (ValueError, KeyError, ...)
        raise ConfigError(
            MSG_TIME_ZONE, f"unknown time zone {name!r} (use an IANA name such as 'UTC')"
        ) from None
    return name


def _check_unknown(o: _Opts, known: tuple[str, ...], what: str) -> None:
    lowered = {k.lower(): k for k in known}
    all_names = {k.lower(): k for k in READ_OPTIONS + WRITE_OPTIONS}
    for key in o.raw:
        if key in lowered or key.startswith(CLIENT_PREFIX) or key in _SPARK_GENERIC:
            continue
        if key in KAFKA_UNSUPPORTED:
            raise ConfigError(key, KAFKA_UNSUPPORTED[key])
        if key.startswith("kafka."):
            raise ConfigError(key, "kafka.* options configure a Kafka client and do not apply: the tubemq source "
                              "takes tubemq.master and tubemq.<client setting> (e.g. tubemq.rpc_timeout_ms)")
        if key in all_names:
            log.warning("option %r is not used for a %s and is ignored", all_names[key], what)
            continue
        close = difflib.get_close_matches(key, list(lowered), n=1, cutoff=0.8)
        if close:
            raise ConfigError(key, f"unknown option; did you mean {lowered[close[0]]!r}?")
        log.warning("unknown option %r is ignored by the tubemq %s", key, what)


def _config_class(kind: str) -> type:
    if kind == "producer":
        from ..config import ProducerConfig

        return ProducerConfig
    from ..config import ConsumerConfig  # lazy re-export of tubemq.consumer.config

    return ConsumerConfig


#: Client settings this source manages itself (a ``tubemq.*`` option for them would be ignored or clash).
_RESERVED_CLIENT = {"master", "stats_callback", "partitioner", "group", "topics", "consume_from"}


def _client_options(o: _Opts, master: str, kind: str) -> dict[str, Any]:
    """``tubemq.*`` options -> typed keyword options for the client, validated by building its config."""
    wanted = {
        k[len(CLIENT_PREFIX) :]: v for k, v in o.raw.items() if k.startswith(CLIENT_PREFIX) and k != MASTER
    }
    if not wanted:
        return {}
    cls = _config_class(kind)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    by_loose = {name.replace("_", "").lower(): name for name in fields}
    out: dict[str, Any] = {}
    for key, raw in sorted(wanted.items()):
        option = CLIENT_PREFIX + key
        name = by_loose.get(key.replace("_", "").lower())
        if name in _RESERVED_CLIENT:
            raise ConfigError(
                option,
                "is managed by the source (reads use private groups; see groupIdPrefix and commitOffsetsToGroup)",
            )
        if name is None:
            known = ", ".join(CLIENT_PREFIX + n for n in sorted(fields) if n not in _RESERVED_CLIENT)
            raise ConfigError(option, f"not a {kind} setting (known: {known})")
        out[name] = _convert_field(option, fields[name], raw)
    probe: dict[str, Any] = {"group": "spark-options-check"} if "group" in fields else {}
    try:
        cls(master=master, **probe, **out)
    except ConfigError as exc:
        raise ConfigError(CLIENT_PREFIX + exc.field, str(exc).split(": ", 1)[-1]) from None
    except TypeError as exc:
        raise ConfigError(CLIENT_PREFIX + "*", f"rejected by {cls.__name__}: {exc}") from None
    return out


def _convert_field(option: str, f: dataclasses.Field[Any], raw: str) -> Any:
    ann = str(f.type).replace(" ", "")
    default = f.default
    text = raw.strip()
    try:
        if isinstance(default, bool) or ann in ("bool", "bool|None"):
            low = text.lower()
            if low not in _TRUE | _FALSE:
                raise ValueError(raw)
            return low in _TRUE
        if (isinstance(default, int) and not isinstance(default, bool)) or ann in ("int", "int|None"):
            return int(text)
        if isinstance(default, float) or ann in ("float", "float|None"):
            return float(text)
    except ValueError:
        raise ConfigError(option, f"bad value {raw!r} (expected {ann})") from None
    if "list" in ann and "str" not in ann.split("|")[0]:
        return [x.strip() for x in text.split(",") if x.strip()]
    return text
