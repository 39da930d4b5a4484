"""Topic metadata of the embedded server, persisted as JSON (atomic write + rename).

The real master keeps topic deployments in ZooKeeper/BDB; here one small JSON file in the data
directory is enough. The broker set is not persisted: the cluster registers its broker at start, which
bumps ``broker_checksum`` like a real master seeing a broker come online (§4.11). ``term`` counts master
takeovers (server/replication.py): persisted with the topics so that a restarted master knows which
of two masters holds the newer metadata.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..protocol import constants as C

log = logging.getLogger("tubemq.server.meta")

#: Admin API rule for topic names (the binary RPC path does not check characters, §4.0).
#: Java's ``^[a-zA-Z]\w+$`` is ASCII-only (no ``a٠١``) and matches the whole name (no trailing newline).
TOPIC_NAME_RE = re.compile(r"[a-zA-Z]\w+", re.ASCII)
META_FILE = "meta.json"
MAX_PARTITIONS = 10000  # a store's local partition ids must stay below META_STORE_INS_BASE
MAX_STORES = 100


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class TopicConf:
    """One topic deployment: the same partitions/stores on each broker of ``broker_ids``."""

    name: str
    num_partitions: int = 3
    num_stores: int = 1
    max_msg_size: int | None = None  # None = cluster default
    accept_publish: bool = True
    accept_subscribe: bool = True
    closed: bool = False
    create_time_ms: int = field(default_factory=_now_ms)
    #: Brokers the topic is deployed on (admin ``brokerId=1,2,3``); None = every broker of the cluster.
    broker_ids: list[int] | None = None

    def on_broker(self, broker_id: int) -> bool:
        return self.broker_ids is None or broker_id in self.broker_ids

    def partition_ids(self) -> list[int]:
        """All partition ids: ``store * 10000 + local`` (§4.10)."""
        return [
            s * C.META_STORE_INS_BASE + i for s in range(self.num_stores) for i in range(self.num_partitions)
        ]

    def effective_max_msg_size(self, default: int) -> int:
        return self.max_msg_size if self.max_msg_size is not None else default

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TopicConf:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass(frozen=True)
class BrokerEntry:
    """A broker as the master advertises it (§4.1)."""

    broker_id: int
    host: str
    port: int
    tls_port: int | None = None


def _check_int(name: str, value: Any, lo: int, hi: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise ConfigError(name, f"must be an int within {lo}..{hi}, got {value!r}")
    return value


def _check_topic_fields(changes: dict[str, Any]) -> None:
    if "num_partitions" in changes:
        _check_int("num_partitions", changes["num_partitions"], 1, MAX_PARTITIONS)
    if "num_stores" in changes:
        _check_int("num_stores", changes["num_stores"], 1, MAX_STORES)
    if changes.get("max_msg_size") is not None:
        _check_int("max_msg_size", changes["max_msg_size"], C.MIN_MAX_MSG_SIZE, C.MAX_MAX_MSG_SIZE)
    ids = changes.get("broker_ids")
    if ids is not None and (
        not isinstance(ids, list) or not ids or not all(isinstance(b, int) and not isinstance(b, bool) for b in ids)
    ):
        raise ConfigError("broker_ids", f"must be None or a non-empty list of broker ids, got {ids!r}")
    for name in ("accept_publish", "accept_subscribe", "closed"):
        if name in changes and not isinstance(changes[name], bool):
            raise ConfigError(name, f"must be a bool, got {changes[name]!r}")


def validate_topic_name(name: Any) -> str:
    """The admin API's topic-name rule: ``^[a-zA-Z]\\w+$`` and at most 64 characters."""
    if not isinstance(name, str) or not name:
        raise ConfigError("name", f"topic name must be a non-empty string, got {name!r}")
    if len(name) > C.META_MAX_TOPICNAME_LENGTH:
        raise ConfigError("name", f"topic name longer than {C.META_MAX_TOPICNAME_LENGTH} characters: {name!r}")
    if not TOPIC_NAME_RE.fullmatch(name) or name == C.OFFSET_HISTORY_TOPIC:
        raise ConfigError("name", f"topic name {name!r} must match ^[a-zA-Z]\\w+$")
    return name


class MetaStore:
    """Topic deployments + broker set; thread-safe, persisted on every topic change."""

    def __init__(self, data_dir: Path | str) -> None:
        self.data_dir = Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._path = self.data_dir / META_FILE
        self._lock = threading.RLock()
        self._topics: dict[str, TopicConf] = {}
        self.brokers: dict[int, BrokerEntry] = {}
        #: ms timestamp of the last change of the broker set (+10 on collisions), §4.11.
        self.broker_checksum: int = _now_ms()
        #: ApprovedClientConfig.configId; -2 like the captured master without a cluster-setting record.
        self.config_id: int = C.META_VALUE_UNDEFINED
        #: Called (without arguments) after every topic change.
        self.on_change: list[Callable[[], None]] = []
        #: Counts topic changes in this process (broker processes echo the version they applied).
        self.version = 0
        #: Master term: raised by every standby takeover, copied by replication (server/replication.py).
        self.term = 0
        #: This store is an active master's metadata or a copy of it (a store a standby never filled is
        #: not: such a standby must not take over, its empty topic set would make the brokers drop data).
        self.authoritative = False
        self._load()

    # ---- persistence

    def _load(self) -> None:
        if not self._path.exists():
            return
        try:
            data = json.loads(self._path.read_text("utf-8"))
            topics = [TopicConf.from_json(t) for t in data.get("topics", [])]
        except (OSError, ValueError, TypeError) as exc:
            raise ConfigError("data_dir", f"unreadable topic metadata {self._path}: {exc}") from exc
        self._topics = {t.name: t for t in topics}
        term = data.get("term", 0)
        self.term = term if isinstance(term, int) and not isinstance(term, bool) and term >= 0 else 0
        self.authoritative = data.get("authoritative", True) is not False  # files of older versions: True

    def _save(self) -> None:
        data = {
            "version": 1,
            "term": self.term,
            "authoritative": self.authoritative,
            "topics": [t.to_json() for t in self._topics.values()],
        }
        tmp = self._path.with_suffix(".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._path)
        try:
            fd = os.open(self.data_dir, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError:  # pragma: no cover - directories cannot be fsynced on some platforms
            pass

    def _changed(self) -> None:
        self.version += 1
        self._save()
        for cb in list(self.on_change):
            try:
                cb()
            except Exception:  # a listener must not break the metadata change itself
                log.exception("topic change listener failed")

    # ---- topics

    def create_topic(
        self,
        name: str,
        partitions: int = 3,
        stores: int = 1,
        max_msg_size: int | None = None,
        *,
        accept_publish: bool = True,
        accept_subscribe: bool = True,
        broker_ids: list[int] | None = None,
    ) -> TopicConf:
        """Add a topic; ConfigError on a bad name or value or when it already exists."""
        validate_topic_name(name)
        if broker_ids is not None:
            broker_ids = sorted(set(broker_ids)) if isinstance(broker_ids, (list, tuple, set)) else broker_ids
        _check_topic_fields(
            {
                "num_partitions": partitions,
                "num_stores": stores,
                "max_msg_size": max_msg_size,
                "accept_publish": accept_publish,
                "accept_subscribe": accept_subscribe,
                "broker_ids": broker_ids,
            }
        )
        with self._lock:
            if name in self._topics:
                raise ConfigError("name", f"topic {name!r} already exists")
            conf = TopicConf(
                name,
                num_partitions=partitions,
                num_stores=stores,
                max_msg_size=max_msg_size,
                accept_publish=accept_publish,
                accept_subscribe=accept_subscribe,
                broker_ids=broker_ids,
            )
            self._topics[name] = conf
            self._changed()
            return conf

    def delete_topic(self, name: str) -> bool:
        """Remove a topic; False when it did not exist."""
        with self._lock:
            if self._topics.pop(name, None) is None:
                return False
            self._changed()
            return True

    def update_topic(self, name: str, **changes: Any) -> TopicConf:
        """Change fields of a topic (e.g. ``closed=True``, ``max_msg_size=...``)."""
        allowed = {
            "num_partitions", "num_stores", "max_msg_size", "accept_publish", "accept_subscribe", "closed", "broker_ids"
        }
        for k in changes:
            if k not in allowed:
                raise ConfigError(k, "not a changeable topic field")
        _check_topic_fields(changes)
        with self._lock:
            conf = self._topics.get(name)
            if conf is None:
                raise ConfigError("name", f"topic {name!r} does not exist")
            new = dataclasses.replace(conf, **changes)
            self._topics[name] = new
            self._changed()
            return new

    def sync_topics(self, topics: list[TopicConf]) -> bool:
        """A broker process takes the master's topic set as it is (heartbeat answer); True if changed."""
        new = {t.name: t for t in topics}
        with self._lock:
            if new == self._topics:
                return False
            self._topics = new
            self._changed()
            return True

    def set_term(self, term: int) -> None:
        """Record a new master term (a takeover, or the active master's term seen by replication)."""
        with self._lock:
            if term != self.term:
                self.term = term
                self._save()

    def set_authoritative(self) -> None:
        """Mark this store as an active master's metadata or a full copy of it (persisted)."""
        with self._lock:
            if not self.authoritative:
                self.authoritative = True
                self._save()

    def get(self, name: str) -> TopicConf | None:
        return self._topics.get(name)

    def topics(self) -> list[TopicConf]:
        with self._lock:
            return sorted(self._topics.values(), key=lambda t: t.name)

    # ---- brokers

    def set_broker(self, entry: BrokerEntry) -> None:
        """Register (or replace) a broker; bumps ``broker_checksum`` when the set changes."""
        with self._lock:
            if self.brokers.get(entry.broker_id) == entry:
                return
            self.brokers[entry.broker_id] = entry
            self._bump_checksum()

    def remove_broker(self, broker_id: int) -> None:
        with self._lock:
            if self.brokers.pop(broker_id, None) is not None:
                self._bump_checksum()

    def _bump_checksum(self) -> None:
        now = _now_ms()
        self.broker_checksum = now if now > self.broker_checksum else self.broker_checksum + 10
