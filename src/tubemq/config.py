"""Typed client configuration (dataclasses) and the ``tubemq://`` DSN form.

Names follow the Java ``TubeClientConfig`` where a Java setting exists (``rpc_timeout_ms`` =
``rpcReadTimeoutMs``, ``heartbeat_period_ms`` = ``heartbeatPeriodMs`` ...); units are in the name.
Every value is validated when the object is built; a bad value raises
:class:`tubemq.errors.ConfigError` whose ``field`` names the option.

All three client configs live here (``tubemq.ClientConfig``, ``tubemq.ProducerConfig``,
``tubemq.ConsumerConfig``); consumer defaults are the Java client's (docs/PROTOCOL.md §5.7).

DSN: ``tubemq://host1:8715,host2:8715?rpc_timeout_ms=5000&tls=true`` -> master list + options;
``ProducerConfig.from_dsn(dsn, **overrides)``.
"""

from __future__ import annotations

import dataclasses
import ssl
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import parse_qsl, unquote, urlsplit

from ._options import ClientOptions, ConsumerOptions, ProducerOptions, unknown_option
from .codec.python import DEFAULT_MAX_PARTITIONS, DEFAULT_MAX_TOTAL_PARTITIONS
from .errors import ConfigError, TubeMQConnectionError
from .protocol.constants import (
    ARRAY_SEP,
    CONNECT_TIMEOUT_MS,
    DEFAULT_RPC_TIMEOUT_MS,
    HEARTBEAT_PERIOD_MS,
    MAX_RPC_TIMEOUT_MS,
    META_MAX_BOOKED_TOPIC_COUNT,
    META_MAX_GROUPNAME_LENGTH,
    META_MAX_TOPICNAME_LENGTH,
    MIN_RPC_TIMEOUT_MS,
    MSG_NOT_FOUND_WAIT_MS,
    PULL_PROTECT_CONFIRM_MS,
    READ_STATUS_FROM_MAX,
    READ_STATUS_FROM_MAX_ALWAYS,
    READ_STATUS_NORMAL,
    REB_CONFIRM_WAIT_MS,
    SHUTDOWN_REBALANCE_WAIT_MS,
    UNAVAILABLE_FORBIDDEN_MS,
    ConsumePosition,
)

C = TypeVar("C", bound="ClientConfig")

#: Longest wait between failing master heartbeats (``heartbeat_fail_wait_ms``): the Java client
#: pauses 60 s after 5 failures, which a group pays in full however soon the network returns.
HEARTBEAT_FAIL_WAIT_MS = 2000

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def parse_dsn(dsn: str) -> tuple[list[str], dict[str, str]]:
    """``tubemq://h:p,h:p?k=v&...`` -> (["h:p", ...], {"k": "v"}); a bare ``h:p,h:p`` is accepted too."""
    if not isinstance(dsn, str) or not dsn.strip():
        raise ConfigError("master", f"empty DSN {dsn!r}")
    text = dsn.strip()
    if "://" in text:
        parts = urlsplit(text)
        if parts.scheme in ("http", "https"):
            raise ConfigError("master", f"{text!r} is a web (admin API) address: the master's RPC address is "
                              f"host:port (usually port 8715), or tubemq://host:port")
        if parts.scheme not in ("tubemq", "tubemqs"):
            raise ConfigError("master", f"DSN scheme must be tubemq:// (got {parts.scheme!r})")
        hosts = unquote(parts.netloc)
        query = parts.query
        params = dict(parse_qsl(query, keep_blank_values=True, strict_parsing=False))
        if parts.scheme == "tubemqs":
            params.setdefault("tls", "true")
    else:
        hosts, _, query = text.partition("?")
        params = dict(parse_qsl(query, keep_blank_values=True))
    addresses = [h.strip() for h in hosts.split(",") if h.strip()]
    if not addresses:
        raise ConfigError("master", f"no master address in DSN {dsn!r}")
    return addresses, params


def _normalize_master(value: Any) -> list[str]:
    from .net.invoker import normalize_master_list

    if isinstance(value, str) and "://" in value:
        value = parse_dsn(value)[0]
    if not isinstance(value, (str, list, tuple)):
        raise ConfigError("master", f"expected 'host:port,host:port' or a list, got {type(value).__name__}")
    try:
        return normalize_master_list(value)
    except TubeMQConnectionError as exc:
        raise ConfigError("master", str(exc)) from exc


def _ranged(default: int, lo: int, hi: int) -> Any:
    """A field of ints in ``[lo, hi]``: the range stands next to the field, ``_check_fields`` applies it."""
    return field(default=default, metadata={"range": (lo, hi)})


def _check_fields(config: ClientConfig) -> None:
    """The checks every config field of a kind gets: ``_ranged`` ints in their range, bools bools."""
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if "range" in f.metadata:
            _int_range(f.name, value, *f.metadata["range"])
        elif f.type == "bool" and not isinstance(value, bool):
            raise ConfigError(f.name, "must be a bool")


def _int_range(name: str, value: Any, lo: int, hi: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(name, f"must be an int, got {value!r}")
    if not lo <= value <= hi:
        raise ConfigError(name, f"must be in [{lo}, {hi}], got {value}")


@dataclass
class ClientConfig:
    """Settings shared by producers and consumers.

    ``master``: master address list (``"h:p,h:p"`` or list); normalised to a sorted list.
    ``rpc_timeout_ms``: per-request timeout sent to the server and waited for locally
    (Java ``rpcReadTimeoutMs``; allowed 3000..600000 like Java's clamp, but rejected instead of
    silently clamped). ``connect_timeout_ms``: TCP/TLS connect timeout.
    ``heartbeat_period_ms``: master heartbeat period (Java 13000).
    ``register_retry_wait_ms``: pause between registration attempts.
    ``pool``: ``"shared"`` (one connection per address per process, like Java) or ``"private"``.
    ``max_inflight``: requests awaiting an answer per connection before senders wait.
    ``tls*``: TLS to master and brokers (PEM files); ``auth_user``/``auth_password``: §8 auth
    (the password is never shown in ``repr``). ``local_address``: the IPv4 reported as hostName.
    ``stats_interval_ms`` / ``stats_callback``: call ``stats_callback(metrics_snapshot)`` every that many
    milliseconds (0 = never).
    ``max_partitions`` / ``max_total_partitions``: the most partitions one topic / one master answer may
    expand to (topicInfo strings name broker x partitions x stores, so a hostile or broken master could
    ask for millions); an answer over a cap is refused with a DecodeError before anything is built.
    """

    master: str | list[str] = ""
    rpc_timeout_ms: int = _ranged(DEFAULT_RPC_TIMEOUT_MS, MIN_RPC_TIMEOUT_MS, MAX_RPC_TIMEOUT_MS)
    connect_timeout_ms: int = _ranged(CONNECT_TIMEOUT_MS, 1, 600000)
    heartbeat_period_ms: int = _ranged(HEARTBEAT_PERIOD_MS, 10, 3600000)
    register_retry_wait_ms: int = _ranged(1000, 1, 600000)
    pool: str = "shared"
    max_inflight: int = _ranged(4096, 1, 1 << 20)
    #: TLS to master and brokers.
    tls: bool = False
    #: CA bundle (PEM) to verify the servers with (default: the system's).
    tls_ca: str | None = None
    #: Client certificate (PEM) for mutual TLS.
    tls_cert: str | None = None
    #: Client private key (PEM) for ``tls_cert``.
    tls_key: str | None = None
    #: Verify the server certificate and host name.
    tls_verify: bool = True
    #: User name for TubeMQ authentication (signed register and heartbeat, broker visit tokens).
    auth_user: str | None = None
    #: Password of ``auth_user``; never logged, hidden from ``repr``.
    auth_password: str | None = field(default=None, repr=False)
    #: IPv4 address reported to the master as this client's host (default: detected).
    local_address: str | None = None
    #: Call ``stats_callback(client.metrics())`` this often (ms); 0 = never.
    stats_interval_ms: int = _ranged(0, 0, 86400000)
    #: Callable that receives the metrics snapshots of ``stats_interval_ms``.
    stats_callback: Callable[[dict[str, Any]], Any] | None = field(default=None, repr=False, compare=False)
    max_partitions: int = _ranged(DEFAULT_MAX_PARTITIONS, 1, 10_000_000)
    max_total_partitions: int = _ranged(DEFAULT_MAX_TOTAL_PARTITIONS, 1, 100_000_000)

    def __post_init__(self) -> None:
        self.validate()

    # ------------------------------------------------------------------ validation

    def validate(self) -> None:
        if self.master in ("", None, []):
            raise ConfigError("master", "at least one master address (host:port) is required")
        self.master = _normalize_master(self.master)
        _check_fields(self)
        if self.pool not in ("shared", "private"):
            raise ConfigError("pool", f"must be 'shared' or 'private', got {self.pool!r}")
        if self.tls_key is not None and self.tls_cert is None:
            raise ConfigError("tls_cert", "tls_key given without tls_cert")
        if (self.auth_user is None) != (self.auth_password is None):
            raise ConfigError("auth_user", "auth_user and auth_password go together")
        if self.auth_user is not None and not self.auth_user.strip():
            raise ConfigError("auth_user", "must not be blank")
        if self.stats_callback is not None and not callable(self.stats_callback):
            raise ConfigError("stats_callback", "must be callable")
        if self.local_address is not None:
            parts = self.local_address.split(".")
            if len(parts) != 4 or not all(p.isdigit() and int(p) < 256 for p in parts):
                raise ConfigError("local_address", f"must be an IPv4 address, got {self.local_address!r}")

    # ------------------------------------------------------------------ helpers

    @property
    def masters(self) -> list[str]:
        return list(self.master)  # type: ignore[arg-type]

    @property
    def auth_enabled(self) -> bool:
        return self.auth_user is not None

    def ssl_context(self) -> ssl.SSLContext | None:
        """An ``SSLContext`` from the tls_* settings, or None when TLS is off."""
        if not self.tls:
            return None
        try:
            ctx = ssl.create_default_context(cafile=self.tls_ca)
            if not self.tls_verify:
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
            if self.tls_cert:
                ctx.load_cert_chain(self.tls_cert, self.tls_key)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError("tls_ca", f"cannot build the TLS context: {exc}") from exc
        return ctx

    @classmethod
    def from_dsn(cls: type[C], dsn: str, **overrides: Any) -> C:
        """Build from ``tubemq://h:p,h:p?option=value``; keyword overrides win over DSN params."""
        addresses, params = parse_dsn(dsn)
        kwargs = _convert(cls, params)
        kwargs.update(overrides)
        kwargs.setdefault("master", addresses)
        return cls(**kwargs)

    @classmethod
    def from_options(cls: type[C], master: str | Iterable[str] | None, options: Mapping[str, Any]) -> C:
        """``Producer("h:p", rpc_timeout_ms=...)`` style: master + keyword options, unknown names refused."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(options) - names)
        if unknown:
            raise ConfigError(unknown[0], unknown_option(unknown[0], names))
        if isinstance(master, str) and "://" in master:
            return cls.from_dsn(master, **options)
        return cls(master=master if master is not None else "", **options)  # type: ignore[arg-type]


#: ``(topic, data, key) -> (data, key)``: a producer's serializers applied to one message
SerializeHook = Callable[[str, Any, Any], "tuple[Any, Any]"]


def _serialize_hook(value_serializer: Any, key_serializer: Any) -> SerializeHook | None:
    """One callable for the producer's send path, or None (no serializer: nothing is called)."""
    from .serializers import apply, resolve

    value_fn = resolve("value_serializer", value_serializer, "serialize")
    key_fn = resolve("key_serializer", key_serializer, "serialize")
    if value_fn is None and key_fn is None:
        return None

    def hook(topic: str, data: Any, key: Any) -> tuple[Any, Any]:
        if value_fn is not None:
            data = apply(value_fn, data, "value_serializer", topic)
        if key_fn is not None and key is not None:
            key = apply(key_fn, key, "key_serializer", topic)
        return data, key

    return hook


#: Options whose value is a Python object (a function), so never in a ``tubemq://`` string.
_OBJECT_OPTIONS = ("stats_callback", "partitioner")


def _convert(cls: type, params: Mapping[str, str]) -> dict[str, Any]:
    """DSN strings -> typed values, by the type of each field's default."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    out: dict[str, Any] = {}
    for key, raw in params.items():
        f = fields.get(key)
        if f is None:
            raise ConfigError(key, unknown_option(key, (n for n in fields if n not in _OBJECT_OPTIONS)))
        if key in _OBJECT_OPTIONS:
            raise ConfigError(key, "takes a Python object, which a tubemq:// string cannot carry: pass it as a "
                              "keyword argument instead")
        default = f.default
        ann = str(f.type)
        try:
            if isinstance(default, bool) or ann == "bool":
                low = raw.strip().lower()
                if low not in _TRUE | _FALSE:
                    raise ValueError(raw)
                out[key] = low in _TRUE
            elif isinstance(default, int) or ann == "int":
                out[key] = int(raw)
            elif isinstance(default, float) or ann in ("float", "float | None"):
                out[key] = float(raw)
            else:
                out[key] = raw
        except ValueError as exc:
            raise ConfigError(key, f"bad value {raw!r} in DSN") from exc
    return out


@dataclass
class ProducerConfig(ClientConfig):
    """Producer settings (in addition to :class:`ClientConfig`).

    ``partitioner``: ``"round_robin"`` (Java default), ``"key_hash"`` (used automatically when a
    ``key`` is given) or a callable ``(topic, key, partitions) -> Partition``.
    ``max_pending``: sends accepted but not yet answered, per producer; ``send_async`` blocks (up to
    ``max_block_ms``) and ``await send`` waits when it is reached — the bounded buffer.
    ``max_block_ms``: how long ``send_async`` may block on a full buffer before TubeMQTimeoutError.
    ``retries``: automatic resends of a message the broker explicitly refused with a retryable code
    (419, 500, 503; never after a timeout or a connection drop, where the message may be stored).
    ``retry_backoff_ms``: pause before such a resend. ``unavailable_ms``: how long a broker that
    answered 503 is skipped (Java 50000). ``broker_failure_threshold`` / ``broker_shield_ms``:
    a broker with that many consecutive send failures or timeouts is skipped for that long.
    ``value_serializer`` / ``key_serializer``: turn a message value / routing key into bytes before it
    is sent (a callable, ``"json"``, ``"str"``, or a :class:`tubemq.serializers.Codec`); the key is
    never sent, a serialized key only chooses the partition (docs/guide/serializers.md).
    """

    max_pending: int = _ranged(65536, 1, 1 << 24)
    max_block_ms: int = _ranged(60000, 0, 3600000)
    retries: int = _ranged(2, 0, 100)
    retry_backoff_ms: int = _ranged(100, 0, 600000)
    unavailable_ms: int = _ranged(UNAVAILABLE_FORBIDDEN_MS, 0, 3600000)
    broker_failure_threshold: int = _ranged(5, 1, 1000000)
    broker_shield_ms: int = _ranged(30000, 0, 3600000)
    partitioner: str | Callable[..., Any] = "round_robin"
    value_serializer: Any = field(default=None, compare=False)
    key_serializer: Any = field(default=None, compare=False)

    def validate(self) -> None:
        super().validate()
        self.serialize_hook: SerializeHook | None = _serialize_hook(self.value_serializer, self.key_serializer)
        if not callable(self.partitioner) and self.partitioner not in ("round_robin", "key_hash"):
            raise ConfigError("partitioner", "must be 'round_robin', 'key_hash' or a callable")


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
    """Consumer settings (in addition to :class:`ClientConfig`).

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
    ``heartbeat_fail_wait_ms``: longest wait between master heartbeat attempts while they fail (the
    wait starts at ``register_retry_wait_ms`` and doubles; Java pauses 60000 after 5 failures).
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
    fetch_concurrency: int = _ranged(3, 1, 256)
    prefetch_batches: int = _ranged(4, 1, 4096)
    msg_not_found_wait_ms: int = _ranged(MSG_NOT_FOUND_WAIT_MS, 0, 600000)
    filter_wait_ms: int = _ranged(100, 0, 600000)
    confirm_in_local: bool = False
    confirm_timeout_ms: int = _ranged(PULL_PROTECT_CONFIRM_MS, 100, 86400000)
    rebalance_confirm_wait_ms: int = _ranged(REB_CONFIRM_WAIT_MS, 0, 600000)
    register_rounds: int = _ranged(5, 1, 100)
    shutdown_wait_ms: int = _ranged(SHUTDOWN_REBALANCE_WAIT_MS, 0, 600000)
    heartbeat_fail_wait_ms: int = _ranged(HEARTBEAT_FAIL_WAIT_MS, 10, 3600000)
    verify_checksum: bool = True
    client_filter: bool = True
    hook_timeout_ms: int = _ranged(10000, 1, 3600000)
    iter_timeout_ms: int = _ranged(0, 0, 86400000)
    #: ``close()`` returns within about this long however many requests are outstanding: partitions
    #: are unregistered and the master told within it, and what has not answered by then is
    #: abandoned (the broker and master then expire this consumer, as after a crash)
    close_timeout_ms: int = _ranged(1000, 0, 600000)
    #: ``bytes -> object`` applied to each message's data before it is handed out (a callable,
    #: ``"json"``, ``"str"`` or a :class:`tubemq.serializers.Codec`); see docs/guide/serializers.md
    value_deserializer: Any = field(default=None, compare=False)
    # server-side bound consumption (Java completeSubscribe(sessionKey, sourceCount, isSelectBig,
    # partOffsetMap)); see docs/guide/bound-consumption.md
    bound_offsets: Any = None
    #: Bound consumption: the run's key, the same for every member of one run.
    session_key: str = ""
    #: Bound consumption: the number of members; the group's allocation waits until all registered.
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
        if self.bound_offsets is not None:
            self._validate_bound()
        from .serializers import resolve

        #: the resolved ``value_deserializer`` (None: data stays bytes)
        self.deserialize: Callable[[bytes], Any] | None = resolve("value_deserializer", self.value_deserializer,
                                                                   "deserialize")

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
        """``RegisterRequestC2M.requiredPartition``: ``"key=offset,key=offset"`` (docs/PROTOCOL.md §4.12)."""
        return ",".join(f"{k}={v}" for k, v in (self.bound_offsets or {}).items())

    @property
    def first_read_status(self) -> int:
        """readStatus of the first registration of a partition by this consumer instance."""
        return int(CONSUME_FROM[self.consume_from][1])

    def topic_conditions(self) -> list[str]:
        """``RegisterRequestC2M.topicCondition``: ``"topic#f1,f2"`` per filtered topic (§4.8)."""
        return [f"{t}#{','.join(sorted(f))}" for t, f in sorted(self.topics.items()) if f]


__all__ = ["CONSUME_FROM", "ClientConfig", "ClientOptions", "ConsumerConfig", "ConsumerOptions", "ProducerConfig",
           "ProducerOptions", "normalize_topics", "parse_dsn"]


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
