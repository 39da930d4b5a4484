"""Configuration of the embedded TubeMQ server (master + broker in one process).

One flat dataclass so that ``EmbeddedCluster(data_dir, **fields)`` and ``tubemq serve`` share the same
names; defaults follow the real servers (docs/PROTOCOL.md §5.7) except where a test-friendly value is
documented on the field.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..protocol import constants as C

FLUSH_POLICIES = ("always", "interval", "never")
ROLES = ("all", "master", "broker")


@dataclass
class ServerConfig:
    """Settings of one embedded server; ``validate()`` raises ConfigError naming the bad field."""

    #: Directory for topic metadata, message data and group offsets (required).
    data_dir: Path
    #: Address to bind; keep 127.0.0.1 unless other machines must connect.
    host: str = "127.0.0.1"
    #: Master RPC port; 0 = any free port (``tubemq serve``: 8715).
    master_port: int = 0
    #: Broker RPC port; 0 = any free port (``tubemq serve``: 8123).
    broker_port: int = 0
    #: Admin HTTP API port (``/webapi.htm``); 0 = any free port (``tubemq serve``: 8080).
    admin_port: int = 0
    #: Id of the (first) broker; in-process brokers take broker_id, broker_id + 1, ...
    broker_id: int = 1
    #: Brokers run in this process (role "all"): ports from broker_port upward (0 = free ones), each
    #: with its own store directory ``<data_dir>/broker-<id>`` when there are several.
    brokers: int = 1
    #: "all" = master + admin API + ``brokers`` brokers; "master" = master + admin API, brokers join
    #: from other processes; "broker" = one broker that registers with ``master_admin_url``.
    role: str = "all"
    #: Role "broker": admin URL(s) of the master(s) to register with (comma-separated for an active +
    #: standby pair). The registration is an embedded-only admin call, not TubeMQ's broker RPCs.
    #: Role "master" with ``peer_master``: the peer's admin URL, where a standby copies topics, brokers
    #: and term from every ``broker_heartbeat_period_ms`` (None = the address the peer's ``tubemq
    #: serve`` published on this machine, server/endpoints.py). See server/replication.py.
    master_admin_url: str | None = None
    #: Role "broker": registration heartbeat period; the master marks a broker that missed
    #: ``broker_heartbeat_timeout_ms`` offline (its partitions leave topicInfos and assignments).
    broker_heartbeat_period_ms: int = 500
    broker_heartbeat_timeout_ms: int = 2000
    #: A standby master that sees no active master on ``peer_master`` (HOST:PORT of its master RPC
    #: port) for ``takeover_after_ms`` becomes active (the real masters elect one through BDB-JE).
    peer_master: str | None = None
    takeover_after_ms: int = 2000
    #: Master balance round period (real master: 60000 ms; tests use ~200 ms).
    balance_period_ms: int = 1000
    #: When a NEW consumer group gets its first balance: 0 = at once on its first register (the
    #: consumer's first heartbeat, sent right after, brings its partitions: about a second), > 0 = that
    #: many ms after the register, < 0 = at the next periodic round like the real master (whose rounds
    #: run every consumerBalancePeriodMs = 60000 ms, so a real new group waits up to a minute).
    first_balance_delay_ms: int = 0
    #: A consumer without a master heartbeat for this long is removed from its group.
    consumer_heartbeat_timeout_ms: int = C.CONSUMER_HEARTBEAT_TIMEOUT_MS
    #: A producer without a master heartbeat for this long is forgotten.
    producer_heartbeat_timeout_ms: int = C.PRODUCER_HEARTBEAT_TIMEOUT_MS
    #: Broker-side expiry of a (consumer, partition) registration (§5.2.5).
    consumer_reg_timeout_ms: int = C.CONSUMER_REG_TIMEOUT_MS
    #: Start as a standby master: master RPCs answer StandbyException (``set_standby`` switches it).
    standby: bool = False
    #: Master checks signature/timestamp of AuthenticateInfo (§8.2).
    auth_enabled: bool = False
    #: user -> password; when set (and auth_enabled) the master also verifies signatures (§8.1).
    #: Without it, like the real master's default handler, only user/signature/timestamp are checked.
    auth_users: dict[str, str] | None = dataclasses.field(default=None, repr=False)
    #: Broker checks visit tokens against the master's last tokens (§8.3).
    visit_token_check: bool = False
    #: Visit token rotation period.
    visit_token_period_ms: int = 240000
    #: confModAuthToken required by admin write calls (None = no check).
    admin_token: str | None = dataclasses.field(default=None, repr=False)
    #: The server's certificate (PEM): the master and broker RPC ports then serve TLS only.
    tls_cert: str | None = None
    #: The server's private key (PEM) for ``tls_cert``.
    tls_key: str | None = None
    #: "always" = fsync before acknowledging, "interval" = fsync every flush_interval_ms, "never".
    flush: str = "interval"
    #: fsync period of flush="interval" (durability only: reads never depend on it).
    flush_interval_ms: int = 1000
    #: How long fresh messages stay in the broker's (logical) memory cache before its timer moves them
    #: into the files, like the real broker's memCacheFlushIntvl (default 20000 ms); a full cache is
    #: moved at once. Where the data sits decides how reads behave (server/broker/__init__.py ``_read``): cache
    #: reads return everything of the partition up to the cache's end, file reads scan half of the
    #: loaded index entries, filtered consumers read the files only. Tests that want to decide that
    #: themselves set it high and call ``StoreManager.flush_caches()``.
    cache_flush_interval_ms: int = 20000
    #: Delete data older than this (whole segments); None = keep.
    retention_ms: int | None = None
    #: Per-store size cap (whole segments); None = no cap.
    retention_bytes: int | None = None
    #: Cluster default max message size (topics may override); the broker accepts up to this + 10240.
    default_max_msg_size: int = C.DEFAULT_MAX_MSG_SIZE
    #: Bytes returned by one getMessage at most (plus the message that crosses it), §5.3.
    transfer_size: int = C.MAX_TRANSFER_SIZE
    #: Size at which a partition store rolls to a new segment (retention deletes whole segments).
    segment_bytes: int = 64 * 1024 * 1024
    #: Connections the server accepts at once (all ports together).
    max_connections: int = 1024
    #: Requests processed at once per connection.
    max_inflight_per_connection: int = 1024
    #: Buffered request bytes per connection before reading from it pauses.
    max_buffered_bytes_per_connection: int = 64 * 1024 * 1024
    #: RPC connections with no complete request for this long are closed. The real client closes its
    #: side after 300000 ms read-idle (rpc.connect.read.idle.duration); the real server never does.
    rpc_idle_timeout_ms: int = 300000
    #: A connection muted by a list-size-0 header (Java leaves it hanging forever) is closed after this.
    rpc_muted_close_ms: int = 10000
    #: Bytes all incomplete request frames may hold together (per frame: twice the largest topic's max
    #: message size + 10240, + 64 KiB); over it the most stalled holders are closed.
    rpc_partial_frames_budget: int = 256 * 1024 * 1024
    #: Invalid visit tokens after which a broker connection is closed (visit_token_check on).
    max_bad_visit_tokens: int = 3
    #: PEM CA bundle: with TLS on, clients must present a certificate signed by it (mutual TLS).
    tls_client_ca: str | None = None
    #: Serve the embedded-only ``admin_query_offset_by_time``; False answers it as a real TubeMQ broker
    #: does (``Unsupported method``), to exercise the clients' fallback to the msgTime search.
    time_lookup: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.data_dir, Path):
            if not isinstance(self.data_dir, str) or not self.data_dir:
                raise ConfigError("data_dir", f"must be a path, got {self.data_dir!r}")
            self.data_dir = Path(self.data_dir)
        self.validate()

    @property
    def tls(self) -> bool:
        return bool(self.tls_cert)

    def validate(self) -> None:
        """Check every field; the first problem raises ConfigError(field, message)."""
        for name in ("master_port", "broker_port", "admin_port"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= 65535:
                raise ConfigError(name, f"must be a port number 0..65535, got {v!r}")
        if not isinstance(self.host, str) or not self.host.strip():
            raise ConfigError("host", "must be a non-empty host name or address")
        if not isinstance(self.broker_id, int) or isinstance(self.broker_id, bool) or self.broker_id < 0:
            raise ConfigError("broker_id", f"must be a non-negative int, got {self.broker_id!r}")
        if not isinstance(self.brokers, int) or isinstance(self.brokers, bool) or not 1 <= self.brokers <= 64:
            raise ConfigError("brokers", f"must be an int within 1..64, got {self.brokers!r}")
        if self.role not in ROLES:
            raise ConfigError("role", f"must be one of {', '.join(ROLES)}, got {self.role!r}")
        if self.peer_master is not None and (not isinstance(self.peer_master, str) or ":" not in self.peer_master):
            raise ConfigError("peer_master", f"must be HOST:PORT of the peer's master RPC port, got {self.peer_master!r}")
        if self.peer_master is not None and self.role != "master":
            raise ConfigError(
                "peer_master", "a master pair runs with role 'master' (brokers as separate processes reporting to both)"
            )
        if self.peer_master is not None and self.master_admin_url is not None and (
            not isinstance(self.master_admin_url, str) or not self.master_admin_url.startswith("http://")
        ):
            raise ConfigError(
                "master_admin_url", f"the peer's admin URL must be http://HOST:PORT/webapi.htm, got {self.master_admin_url!r}"
            )
        if self.role == "broker" and not self.master_admin_url:
            raise ConfigError("master_admin_url", "a broker process needs the admin URL of its master")
        if self.broker_port and self.broker_port + self.brokers - 1 > 65535:
            raise ConfigError("broker_port", f"ports {self.broker_port}+{self.brokers - 1} exceed 65535")
        positive = (
            "broker_heartbeat_period_ms",
            "broker_heartbeat_timeout_ms",
            "takeover_after_ms",
            "balance_period_ms",
            "consumer_heartbeat_timeout_ms",
            "producer_heartbeat_timeout_ms",
            "consumer_reg_timeout_ms",
            "visit_token_period_ms",
            "flush_interval_ms",
            "cache_flush_interval_ms",
            "transfer_size",
            "segment_bytes",
            "max_connections",
            "max_inflight_per_connection",
            "max_buffered_bytes_per_connection",
            "rpc_idle_timeout_ms",
            "rpc_muted_close_ms",
            "rpc_partial_frames_budget",
            "max_bad_visit_tokens",
        )
        for name in positive:
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ConfigError(name, f"must be a positive int, got {v!r}")
        v = self.first_balance_delay_ms
        if not isinstance(v, int) or isinstance(v, bool):
            raise ConfigError("first_balance_delay_ms", f"must be an int (< 0 = next periodic round), got {v!r}")
        if self.segment_bytes < 4096:
            raise ConfigError("segment_bytes", f"must be at least 4096, got {self.segment_bytes}")
        if self.flush not in FLUSH_POLICIES:
            raise ConfigError("flush", f"must be one of {', '.join(FLUSH_POLICIES)}, got {self.flush!r}")
        for name in ("retention_ms", "retention_bytes"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v <= 0):
                raise ConfigError(name, f"must be None or a positive int, got {v!r}")
        v = self.default_max_msg_size
        if not isinstance(v, int) or isinstance(v, bool) or not C.MIN_MAX_MSG_SIZE <= v <= C.MAX_MAX_MSG_SIZE:
            raise ConfigError(
                "default_max_msg_size", f"must be within {C.MIN_MAX_MSG_SIZE}..{C.MAX_MAX_MSG_SIZE}, got {v!r}"
            )
        if bool(self.tls_cert) != bool(self.tls_key):
            raise ConfigError("tls_cert", "tls_cert and tls_key must be given together")
        smallest_budget = 2 * (C.MAX_MAX_MSG_SIZE + C.META_MAX_MESSAGE_HEADER_SIZE) + 64 * 1024
        if self.rpc_partial_frames_budget < smallest_budget:
            raise ConfigError(
                "rpc_partial_frames_budget",
                f"must hold one largest legal frame ({smallest_budget} bytes), got {self.rpc_partial_frames_budget}",
            )
        if self.tls_client_ca is not None and not self.tls_cert:
            raise ConfigError("tls_client_ca", "needs tls_cert and tls_key (client certificates are checked over TLS)")
        if self.auth_users is not None and (
            not isinstance(self.auth_users, dict)
            or not all(isinstance(k, str) and k and isinstance(v, str) for k, v in self.auth_users.items())
        ):
            raise ConfigError("auth_users", "must be None or a dict of non-empty user name -> password")
        if not isinstance(self.time_lookup, bool):
            raise ConfigError("time_lookup", f"must be True or False, got {self.time_lookup!r}")
        if self.admin_token is not None and (not isinstance(self.admin_token, str) or not self.admin_token):
            raise ConfigError("admin_token", "must be None or a non-empty string")

    def replace(self, **changes: Any) -> ServerConfig:
        """A validated copy with some fields changed."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_kwargs(cls, data_dir: Any, **kwargs: Any) -> ServerConfig:
        """Build from keyword arguments, naming an unknown keyword in the ConfigError."""
        names = {f.name for f in dataclasses.fields(cls)}
        for k in kwargs:
            if k not in names:
                raise ConfigError(k, "unknown server option")
        return cls(data_dir=data_dir, **kwargs)
