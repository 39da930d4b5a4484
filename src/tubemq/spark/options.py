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

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError
from .offsets import (
    OffsetSpec,
    TimestampSpec,
    parse_offsets_option,
    parse_timestamps_option,
)
from .option_names import (
    ADMIN_URL,
    ARROW_BATCH_SIZE,
    ASSIGN,
    CAPACITY,
    CLIENT_PREFIX,
    COMMIT_OFFSETS_TO_GROUP,
    COMPRESS,
    ENDING_OFFSETS,
    ENDING_OFFSETS_BY_TIMESTAMP,
    ENDING_TIMESTAMP,
    FAIL_ON_DATA_LOSS,
    FLUSH_TIMEOUT_MS,
    GROUP_ID_PREFIX,
    INCLUDE_ATTRIBUTES,
    INCLUDE_HEADERS,
    KAFKA_POLL_TIMEOUT_MS,
    KAFKA_UNSUPPORTED,
    MASTER,
    MAX_OFFSETS_PER_TRIGGER,
    MIN_PARTITIONS,
    MSG_TIME_ZONE,
    NUM_RETRIES,
    POLL_TIMEOUT_MS,
    READ_OPTIONS,
    RETRY_INTERVAL_MS,
    STAMP_ATTRIBUTES,
    STARTING_BY_TIMESTAMP_STRATEGY,
    STARTING_OFFSETS,
    STARTING_OFFSETS_BY_TIMESTAMP,
    STARTING_TIMESTAMP,
    STREAM_IDS,
    SUBSCRIBE,
    TIMESTAMP_STRATEGIES,
    TOPIC,
    VALUE_FORMAT,
    VALUE_FORMATS,
    WRITE_OPTIONS,
)
from .option_values import (
    _GROUP_RE,
    _check_offsets_topics,
    _check_topic,
    _check_unknown,
    _client_options,
    _master,
    _Opts,
    _parse_assign,
    _parse_stream_ids,
    _time_zone,
    _topic_list,
    _value_format,
    assign_matches,
)

__all__ = [
    "MASTER",
    "SUBSCRIBE",
    "ASSIGN",
    "STARTING_OFFSETS",
    "ENDING_OFFSETS",
    "MAX_OFFSETS_PER_TRIGGER",
    "FAIL_ON_DATA_LOSS",
    "INCLUDE_ATTRIBUTES",
    "STREAM_IDS",
    "POLL_TIMEOUT_MS",
    "NUM_RETRIES",
    "RETRY_INTERVAL_MS",
    "GROUP_ID_PREFIX",
    "COMMIT_OFFSETS_TO_GROUP",
    "ARROW_BATCH_SIZE",
    "MSG_TIME_ZONE",
    "TOPIC",
    "STAMP_ATTRIBUTES",
    "FLUSH_TIMEOUT_MS",
    "VALUE_FORMAT",
    "CAPACITY",
    "COMPRESS",
    "STARTING_TIMESTAMP",
    "STARTING_OFFSETS_BY_TIMESTAMP",
    "STARTING_BY_TIMESTAMP_STRATEGY",
    "ENDING_TIMESTAMP",
    "ENDING_OFFSETS_BY_TIMESTAMP",
    "MIN_PARTITIONS",
    "INCLUDE_HEADERS",
    "ADMIN_URL",
    "KAFKA_POLL_TIMEOUT_MS",
    "KAFKA_UNSUPPORTED",
    "TIMESTAMP_STRATEGIES",
    "VALUE_FORMATS",
    "CLIENT_PREFIX",
    "READ_OPTIONS",
    "WRITE_OPTIONS",
    "ReadOptions",
    "WriteOptions",
    "assign_matches",
    "parse_read_options",
    "parse_write_options",
    "starting_for",
]

log = logging.getLogger("tubemq.spark.options")


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
