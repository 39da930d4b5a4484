"""Typed client configuration (dataclasses) and the ``tubemq://`` DSN form.

Names follow the Java ``TubeClientConfig`` where a Java setting exists (``rpc_timeout_ms`` =
``rpcReadTimeoutMs``, ``heartbeat_period_ms`` = ``heartbeatPeriodMs`` ...); units are in the name.
Every value is validated when the object is built; a bad value raises
:class:`tubemq.errors.ConfigError` whose ``field`` names the option.

DSN: ``tubemq://host1:8715,host2:8715?rpc_timeout_ms=5000&tls=true`` -> master list + options;
``ProducerConfig.from_dsn(dsn, **overrides)``.
"""

from __future__ import annotations

import dataclasses
import importlib
import ssl
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import parse_qsl, unquote, urlsplit

from .errors import ConfigError, TubeMQConnectionError
from .protocol.constants import (
    CONNECT_TIMEOUT_MS,
    DEFAULT_RPC_TIMEOUT_MS,
    HEARTBEAT_PERIOD_MS,
    MAX_RPC_TIMEOUT_MS,
    MIN_RPC_TIMEOUT_MS,
    UNAVAILABLE_FORBIDDEN_MS,
)

C = TypeVar("C", bound="ClientConfig")

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def parse_dsn(dsn: str) -> tuple[list[str], dict[str, str]]:
    """``tubemq://h:p,h:p?k=v&...`` -> (["h:p", ...], {"k": "v"}); a bare ``h:p,h:p`` is accepted too."""
    if not isinstance(dsn, str) or not dsn.strip():
        raise ConfigError("master", f"empty DSN {dsn!r}")
    text = dsn.strip()
    if "://" in text:
        parts = urlsplit(text)
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


@dataclass
class ClientConfig:
    """Settings shared by producers and consumers.

    ``master``: master address list (``"h:p,h:p"`` or list); normalised to a sorted list.
    ``rpc_timeout_ms``: per-request timeout sent to the server and waited for locally
    (Java ``rpcReadTimeoutMs``; allowed 3000..600000 like Java's clamp, but rejected instead of
    silently clamped). ``connect_timeout_ms``: TCP/TLS connect timeout.
    ``heartbeat_period_ms``: master heartbeat period (Java 13000).
    ``pool``: ``"shared"`` (one connection per address per process, like Java) or ``"private"``.
    ``max_inflight``: requests awaiting an answer per connection before senders wait.
    ``tls*``: TLS to master and brokers (PEM files); ``auth_user``/``auth_password``: §8 auth
    (the password is never shown in ``repr``). ``local_address``: the IPv4 reported as hostName.
    ``stats_interval_s`` / ``stats_callback``: call ``stats_callback(metrics_snapshot)`` periodically.
    """

    master: str | list[str] = ""
    rpc_timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS
    connect_timeout_ms: int = CONNECT_TIMEOUT_MS
    heartbeat_period_ms: int = HEARTBEAT_PERIOD_MS
    register_retry_wait_ms: int = 1000
    pool: str = "shared"
    max_inflight: int = 4096
    tls: bool = False
    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_verify: bool = True
    auth_user: str | None = None
    auth_password: str | None = field(default=None, repr=False)
    local_address: str | None = None
    stats_interval_s: float = 0.0
    stats_callback: Callable[[dict[str, Any]], Any] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.validate()

    # ------------------------------------------------------------------ validation

    def validate(self) -> None:
        if self.master in ("", None, []):
            raise ConfigError("master", "at least one master address (host:port) is required")
        self.master = _normalize_master(self.master)
        _int_range("rpc_timeout_ms", self.rpc_timeout_ms, MIN_RPC_TIMEOUT_MS, MAX_RPC_TIMEOUT_MS)
        _int_range("connect_timeout_ms", self.connect_timeout_ms, 1, 600000)
        _int_range("heartbeat_period_ms", self.heartbeat_period_ms, 10, 3600000)
        _int_range("register_retry_wait_ms", self.register_retry_wait_ms, 1, 600000)
        _int_range("max_inflight", self.max_inflight, 1, 1 << 20)
        if self.pool not in ("shared", "private"):
            raise ConfigError("pool", f"must be 'shared' or 'private', got {self.pool!r}")
        for name in ("tls", "tls_verify"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(name, "must be a bool")
        if self.tls_key is not None and self.tls_cert is None:
            raise ConfigError("tls_cert", "tls_key given without tls_cert")
        if (self.auth_user is None) != (self.auth_password is None):
            raise ConfigError("auth_user", "auth_user and auth_password go together")
        if self.auth_user is not None and not self.auth_user.strip():
            raise ConfigError("auth_user", "must not be blank")
        if not isinstance(self.stats_interval_s, (int, float)) or self.stats_interval_s < 0:
            raise ConfigError("stats_interval_s", "must be a number >= 0 (0 disables the callback)")
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
            raise ConfigError(unknown[0], f"unknown option (known: {', '.join(sorted(names))})")
        if isinstance(master, str) and "://" in master:
            return cls.from_dsn(master, **options)
        return cls(master=master if master is not None else "", **options)  # type: ignore[arg-type]


def _int_range(name: str, value: Any, lo: int, hi: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(name, f"must be an int, got {value!r}")
    if not lo <= value <= hi:
        raise ConfigError(name, f"must be in [{lo}, {hi}], got {value}")


def _convert(cls: type, params: Mapping[str, str]) -> dict[str, Any]:
    """DSN strings -> typed values, by the type of each field's default."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    out: dict[str, Any] = {}
    for key, raw in params.items():
        f = fields.get(key)
        if f is None or key in ("stats_callback", "partitioner"):
            raise ConfigError(key, "unknown or non-DSN option")
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
            elif isinstance(default, float) or ann == "float":
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
    ``retries``: automatic resends of a message the broker explicitly refused with a retryable code
    (419, 500, 503; never after a timeout or a connection drop, where the message may be stored).
    ``retry_backoff_ms``: pause before such a resend. ``unavailable_ms``: how long a broker that
    answered 503 is skipped (Java 50000). ``broker_failure_threshold`` / ``broker_shield_ms``:
    a broker with that many consecutive send failures or timeouts is skipped for that long.
    """

    max_pending: int = 65536
    max_block_ms: int = 60000
    retries: int = 2
    retry_backoff_ms: int = 100
    unavailable_ms: int = UNAVAILABLE_FORBIDDEN_MS
    broker_failure_threshold: int = 5
    broker_shield_ms: int = 30000
    partitioner: str | Callable[..., Any] = "round_robin"

    def validate(self) -> None:
        super().validate()
        _int_range("max_pending", self.max_pending, 1, 1 << 24)
        _int_range("max_block_ms", self.max_block_ms, 0, 3600000)
        _int_range("retries", self.retries, 0, 100)
        _int_range("retry_backoff_ms", self.retry_backoff_ms, 0, 600000)
        _int_range("unavailable_ms", self.unavailable_ms, 0, 3600000)
        _int_range("broker_failure_threshold", self.broker_failure_threshold, 1, 1000000)
        _int_range("broker_shield_ms", self.broker_shield_ms, 0, 3600000)
        if not callable(self.partitioner) and self.partitioner not in ("round_robin", "key_hash"):
            raise ConfigError("partitioner", "must be 'round_robin', 'key_hash' or a callable")


def __getattr__(name: str) -> Any:
    """``ConsumerConfig`` lives in tubemq.consumer.config (owned by the consumer); re-exported lazily."""
    if name == "ConsumerConfig":
        value = importlib.import_module("tubemq.consumer.config").ConsumerConfig
        globals()[name] = value
        return value
    raise AttributeError(f"module 'tubemq.config' has no attribute {name!r}")


__all__ = ["ClientConfig", "ProducerConfig", "parse_dsn"]  # + lazy ConsumerConfig
