"""``ConsumerConfig``: consumer settings on top of :class:`tubemq.config.ClientConfig`.

Defaults are the Java client's (PROTOCOL.md §5.7) unless a field says otherwise; every ``*_ms`` name
maps to a Java ``TubeClientConfig``/``ConsumerConfig`` setting where one exists.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..config import ClientConfig, _int_range
from ..errors import ConfigError
from ..protocol.constants import (
    ARRAY_SEP,
    HEARTBEAT_PERIOD_AFTER_FAIL_MS,
    META_MAX_BOOKED_TOPIC_COUNT,
    META_MAX_GROUPNAME_LENGTH,
    META_MAX_TOPICNAME_LENGTH,
    MSG_NOT_FOUND_WAIT_MS,
    PULL_PROTECT_CONFIRM_MS,
    READ_STATUS_FROM_MAX,
    READ_STATUS_FROM_MAX_ALWAYS,
    READ_STATUS_NORMAL,
    REB_CONFIRM_WAIT_MS,
    SHUTDOWN_REBALANCE_WAIT_MS,
    ConsumePosition,
)

#: consume_from -> readStatus on the first registration of a partition by this instance (§5.2.6)
CONSUME_FROM = {
    "earliest": (ConsumePosition.EARLIEST, READ_STATUS_NORMAL),
    "latest": (ConsumePosition.LATEST, READ_STATUS_FROM_MAX),
    "max": (ConsumePosition.MAX_ALWAYS, READ_STATUS_FROM_MAX_ALWAYS),
}
_FORBIDDEN = "#@:,"
MAX_FILTER_ITEMS = 500
MAX_FILTER_ITEM_LEN = 256


def normalize_topics(value: Any) -> dict[str, frozenset[str]]:
    """``["a", "b"]``, ``"a,b"`` or ``{"a": {"s1", "s2"}, "b": None}`` -> {topic: filter items}."""
    if value is None:
        return {}
    if isinstance(value, str):
        value = [t for t in value.split(ARRAY_SEP)]
    items: Iterable[tuple[Any, Any]]
    if isinstance(value, Mapping):
        items = value.items()
    elif isinstance(value, Iterable):
        items = ((t, None) for t in value)
    else:
        raise ConfigError("topics", f"expected a list of topics or a mapping topic -> stream ids, got {value!r}")
    out: dict[str, frozenset[str]] = {}
    for topic, filters in items:
        if not isinstance(topic, str):
            raise ConfigError("topics", f"topic names are strings, got {topic!r}")
        topic = topic.strip()
        if not topic:
            continue
        if len(topic) > META_MAX_TOPICNAME_LENGTH or any(c in topic for c in _FORBIDDEN):
            raise ConfigError("topics", f"bad topic name {topic!r} (<= {META_MAX_TOPICNAME_LENGTH} chars, "
                              f"no {' '.join(_FORBIDDEN)})")
        if isinstance(filters, str):
            filters = [f for f in filters.split(ARRAY_SEP)]
        flt = frozenset(f.strip() for f in (filters or ()) if isinstance(f, str) and f.strip())
        if filters and not all(isinstance(f, str) for f in filters):
            raise ConfigError("topics", f"stream ids of {topic!r} must be strings")
        if len(flt) > MAX_FILTER_ITEMS:
            raise ConfigError("topics", f"{topic!r}: at most {MAX_FILTER_ITEMS} stream ids per topic")
        for f in flt:
            if len(f) > MAX_FILTER_ITEM_LEN or any(c in f for c in _FORBIDDEN):
                raise ConfigError("topics", f"bad stream id {f!r} for {topic!r}")
        out[topic] = out.get(topic, frozenset()) | flt
    if len(out) > META_MAX_BOOKED_TOPIC_COUNT:
        raise ConfigError("topics", f"at most {META_MAX_BOOKED_TOPIC_COUNT} topics per consumer")
    return out


@dataclass
class ConsumerConfig(ClientConfig):
    """Consumer settings (in addition to :class:`~tubemq.config.ClientConfig`).

    ``group``: consumer group (required). ``topics``: list of topics, or ``{topic: {stream ids}}`` to
    filter on the broker by stream id (``$msgType$``); normalised to ``{topic: frozenset}``.
    ``consume_from``: where a partition starts when the *group* has no committed offset for it:
    ``"earliest"``, ``"latest"`` (Java default) or ``"max"`` (always jump to the end on the first
    registration by this consumer instance).
    ``fetch_concurrency``: getMessage calls in flight at once (Java: 3 fetch threads).
    ``prefetch_batches``: fetched batches buffered for the application (bounded memory).
    ``msg_not_found_wait_ms``: per-partition pause after "no data" (404) (Java 400).
    ``filter_wait_ms``: pause after an empty filtered read near the tail (requireSlow).
    ``confirm_in_local``: ``confirm()`` sends no commit RPC; the commit rides on the partition's next
    fetch (Java ``pullConfirmInLocal``). Iteration and push mode always confirm this way.
    ``confirm_timeout_ms``: a handed-out batch not confirmed within this time is rolled back and the
    partition fetched again (Java ``pullProtectConfirmTimeoutMs``).
    ``rebalance_confirm_wait_ms``: how long a revoked partition waits for the confirm of its
    handed-out batch before rolling it back. ``register_rounds``: broker registration rounds per
    rebalance event. ``shutdown_wait_ms``: close waits this long for a running rebalance.
    ``heartbeat_fail_wait_ms``: master heartbeat pause after 5 consecutive failures (Java 60000).
    ``verify_checksum``: drop messages whose CRC does not match (§4.9). ``client_filter``: also drop,
    on the client, messages whose stream id is not in the topic's filter (Java semantics).
    ``iter_timeout_ms``: ``for msg in consumer`` stops after this long without a message (0 = never).
    ``hook_timeout_ms``: rebalance hooks (on_partitions_assigned / revoked) longer than this are
    logged and no longer awaited.
    ``bound_offsets``: server-side bound consumption (Java ``requireBound``): ``{partition: offset}``
    where a partition is a key ``"brokerId:topic:partitionId"``, a ``(broker_id, topic,
    partition_id)`` tuple or a :class:`~tubemq.codec.Partition`; ``{}`` is bound without offsets,
    None (default) is normal consumption. The group's first allocation starts each named partition
    at its offset (clamped by the broker). Needs ``session_key`` (the same for every member of one
    run; a new key after all members left starts a new reset) and ``source_count`` (the number of
    members; allocation waits until all are registered). ``select_big``: when members name
    different offsets for one partition, the bigger (True, Java default) or the smaller one wins.
    """

    group: str = ""
    topics: Any = field(default_factory=dict)
    consume_from: str = "latest"
    fetch_concurrency: int = 3
    prefetch_batches: int = 4
    msg_not_found_wait_ms: int = MSG_NOT_FOUND_WAIT_MS
    filter_wait_ms: int = 100
    confirm_in_local: bool = False
    confirm_timeout_ms: int = PULL_PROTECT_CONFIRM_MS
    rebalance_confirm_wait_ms: int = REB_CONFIRM_WAIT_MS
    register_rounds: int = 5
    shutdown_wait_ms: int = SHUTDOWN_REBALANCE_WAIT_MS
    heartbeat_fail_wait_ms: int = HEARTBEAT_PERIOD_AFTER_FAIL_MS
    verify_checksum: bool = True
    client_filter: bool = True
    hook_timeout_ms: int = 10000
    iter_timeout_ms: int = 0
    # server-side bound consumption (Java completeSubscribe(sessionKey, sourceCount, isSelectBig,
    # partOffsetMap)); see bound_partition_offsets() and README "Server-side bound consumption"
    bound_offsets: Any = None
    session_key: str = ""
    source_count: int = 0
    select_big: bool = True

    @classmethod
    def build(
        cls,
        master: Any = None,
        group: str | None = None,
        topics: Any = None,
        *,
        consume_from: str | None = None,
        config: ConsumerConfig | None = None,
        **options: Any,
    ) -> ConsumerConfig:
        """The config of ``Consumer(master, group=, topics=, consume_from=, config=, **options)``:
        ``config`` as the base (keyword arguments override it), else master + options."""
        named = {k: v for k, v in (("group", group), ("topics", topics), ("consume_from", consume_from))
                 if v is not None}
        if config is not None:
            if not isinstance(config, ConsumerConfig):
                raise ConfigError("config", f"expected a ConsumerConfig, got {type(config).__name__}")
            changes = {**named, **options}
            if master is not None:
                changes["master"] = master
            return dataclasses.replace(config, **changes) if changes else config
        return cls.from_options(master, {**named, **options})

    def validate(self) -> None:
        super().validate()
        if not isinstance(self.group, str) or not self.group.strip():
            raise ConfigError("group", "a consumer group name is required")
        self.group = self.group.strip()
        if len(self.group) > META_MAX_GROUPNAME_LENGTH or any(c in self.group for c in _FORBIDDEN):
            raise ConfigError("group", f"bad group name {self.group!r} (no {' '.join(_FORBIDDEN)})")
        self.topics = normalize_topics(self.topics)
        if self.consume_from not in CONSUME_FROM:
            raise ConfigError("consume_from", f"must be one of {', '.join(CONSUME_FROM)}, got {self.consume_from!r}")
        _int_range("fetch_concurrency", self.fetch_concurrency, 1, 256)
        _int_range("prefetch_batches", self.prefetch_batches, 1, 4096)
        _int_range("msg_not_found_wait_ms", self.msg_not_found_wait_ms, 0, 600000)
        _int_range("filter_wait_ms", self.filter_wait_ms, 0, 600000)
        _int_range("confirm_timeout_ms", self.confirm_timeout_ms, 100, 86400000)
        _int_range("rebalance_confirm_wait_ms", self.rebalance_confirm_wait_ms, 0, 600000)
        _int_range("register_rounds", self.register_rounds, 1, 100)
        _int_range("shutdown_wait_ms", self.shutdown_wait_ms, 0, 600000)
        _int_range("heartbeat_fail_wait_ms", self.heartbeat_fail_wait_ms, 10, 3600000)
        _int_range("hook_timeout_ms", self.hook_timeout_ms, 1, 3600000)
        _int_range("iter_timeout_ms", self.iter_timeout_ms, 0, 86400000)
        for name in ("confirm_in_local", "verify_checksum", "client_filter", "select_big"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(name, "must be a bool")
        if self.bound_offsets is not None:
            self._validate_bound()

    def _validate_bound(self) -> None:
        """The Java client's completeSubscribe checks, plus types; keys normalised to partition keys."""
        if not isinstance(self.session_key, str) or not self.session_key.strip():
            raise ConfigError("session_key", "bound consumption needs a non-blank session_key")
        self.session_key = self.session_key.strip()
        if isinstance(self.source_count, bool) or not isinstance(self.source_count, int) or self.source_count <= 0:
            raise ConfigError("source_count", f"bound consumption needs source_count > 0, got {self.source_count!r}")
        if not isinstance(self.bound_offsets, Mapping):
            raise ConfigError("bound_offsets", f"expected a mapping partition -> offset, got {self.bound_offsets!r}")
        out: dict[str, int] = {}
        for ref, offset in self.bound_offsets.items():
            key = _partition_key(ref)
            if key.split(":")[1] not in self.topics:
                raise ConfigError("bound_offsets", f"partition {key!r} is not of a subscribed topic "
                                  f"({', '.join(sorted(self.topics))})")
            if isinstance(offset, bool) or not isinstance(offset, int) or not 0 <= offset < 2**63:
                raise ConfigError("bound_offsets", f"offset of {key} must be an int >= 0, got {offset!r}")
            out[key] = offset
        self.bound_offsets = out

    @property
    def bound(self) -> bool:
        """Server-side bound consumption (``requireBound``) is on."""
        return self.bound_offsets is not None

    def required_partition(self) -> str:
        """``RegisterRequestC2M.requiredPartition``: ``"key=offset,key=offset"`` (§4.12)."""
        return ",".join(f"{k}={v}" for k, v in (self.bound_offsets or {}).items())

    @property
    def first_read_status(self) -> int:
        """readStatus of the first registration of a partition by this consumer instance."""
        return int(CONSUME_FROM[self.consume_from][1])

    def topic_conditions(self) -> list[str]:
        """``RegisterRequestC2M.topicCondition``: ``"topic#f1,f2"`` per filtered topic (§4.8)."""
        return [f"{t}#{','.join(sorted(f))}" for t, f in sorted(self.topics.items()) if f]


def _partition_key(ref: Any) -> str:
    """``"brokerId:topic:partitionId"`` of a key string, a Partition or a (broker_id, topic, id) tuple."""
    key = getattr(ref, "key", None)
    if isinstance(key, str):
        ref = key
    elif isinstance(ref, tuple) and len(ref) == 3:
        ref = ":".join(str(x) for x in ref)
    if not isinstance(ref, str):
        raise ConfigError("bound_offsets", f"partition must be a key 'brokerId:topic:partitionId', a Partition "
                          f"or a (broker_id, topic, partition_id) tuple, got {ref!r}")
    items = [x.strip() for x in ref.split(":")]
    if len(items) != 3 or not all(items) or "," in ref or "=" in ref:
        raise ConfigError("bound_offsets", f"partition key {ref!r} must be brokerId:topic:partitionId")
    if not (items[0].isdigit() and items[2].isdigit()):
        raise ConfigError("bound_offsets", f"partition key {ref!r}: broker id and partition id are numbers")
    return f"{int(items[0])}:{items[1]}:{int(items[2])}"


__all__ = ["CONSUME_FROM", "ConsumerConfig", "normalize_topics"]
