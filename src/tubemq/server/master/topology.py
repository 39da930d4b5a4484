"""The master's view of the cluster's shape: which brokers exist and are online, which topics are
deployed on which brokers, and the strings that describe them to clients (brokerInfos, topicInfos,
client-balance topic meta, partitions). The RPC handlers in ``master/__init__.py`` answer from it; broker
processes (server/registration.py) and failure drills change it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

from tubemq.codec import Partition
from tubemq.protocol.constants import (
    ARRAY_SEP,
    ATTR_SEP,
    DEFAULT_BROKER_PORT,
    DEFAULT_BROKER_TLS_PORT,
    SEGMENT_SEP,
)

from ..meta import BrokerEntry, MetaStore, TopicConf

log = logging.getLogger("tubemq.server.master")


class Topology:
    """Brokers (configured, online), topic deployments, and their client-facing strings."""

    def __init__(self, meta: MetaStore, default_max_msg_size: int) -> None:
        self.meta = meta
        self.default_max_msg_size = default_max_msg_size
        self.offline: set[int] = set()
        #: brokers of other processes: broker id -> last registration heartbeat (monotonic)
        self.heartbeats: dict[int, float] = {}
        #: (broker id, topic) -> the broker has the topic: a broker process loads a new topic at its next
        #: heartbeat, and its partitions are handed out only after that (server/registration.py)
        self.deployed_on: Callable[[int, str], bool] = lambda broker_id, topic: True

    def set_online(self, broker_id: int, online: bool) -> None:
        """Mark a broker (un)available: offline brokers publish and serve no partitions."""
        if online:
            self.offline.discard(broker_id)
        else:
            self.offline.add(broker_id)

    def broker_seen(self, entry: BrokerEntry) -> None:
        """A broker process registered or heartbeated (server/registration.py)."""
        self.meta.set_broker(entry)
        self.heartbeats[entry.broker_id] = time.monotonic()
        if entry.broker_id in self.offline:
            log.info("[Broker Online] %d %s:%d", entry.broker_id, entry.host, entry.port)
            self.set_online(entry.broker_id, True)

    def expire_brokers(self, now: float, limit_s: float) -> None:
        for bid, seen in self.heartbeats.items():
            if now - seen > limit_s and bid not in self.offline:
                log.warning("[Broker Timeout] %d: no heartbeat for %.1f s, its partitions go offline", bid, now - seen)
                self.set_online(bid, False)

    def online(self, broker_id: int) -> bool:
        return broker_id in self.meta.brokers and broker_id not in self.offline

    def serving(self, broker_id: int, topic: str) -> bool:
        """The broker is online and has loaded the topic: its partitions of it may be handed out."""
        return self.online(broker_id) and self.deployed_on(broker_id, topic)

    def broker_infos(self, tls: bool) -> list[str]:
        """All configured brokers, ``id:host:port`` or ``id:host: `` for the default port (§4.1)."""
        out = []
        for bid in sorted(self.meta.brokers):
            b = self.meta.brokers[bid]
            if tls:
                port = b.tls_port if b.tls_port is not None else DEFAULT_BROKER_TLS_PORT
                default = DEFAULT_BROKER_TLS_PORT
            else:
                port, default = b.port, DEFAULT_BROKER_PORT
            out.append(f"{bid}:{b.host}:{' ' if port == default else port}")
        return out

    def broker_port(self, broker_id: int, tls: bool) -> tuple[str, int]:
        b = self.meta.brokers[broker_id]
        if tls:
            return b.host, b.tls_port if b.tls_port is not None else DEFAULT_BROKER_TLS_PORT
        return b.host, b.port

    def topic_brokers(self, conf: TopicConf) -> list[int]:
        """Brokers a topic is deployed on (admin ``brokerId=1,2,3``) that the master knows."""
        return [bid for bid in sorted(self.meta.brokers) if conf.on_broker(bid)]

    def topic_infos(self, topics: Iterable[str]) -> list[str]:
        """Producer topicInfos for the published topics that have publishable partitions (§4.2)."""
        default = self.default_max_msg_size
        out = []
        for name in sorted(set(topics)):
            conf = self.meta.get(name)
            if conf is None or conf.closed or not conf.accept_publish:
                continue
            items = [
                f"{bid}{ATTR_SEP}{conf.num_partitions}{ATTR_SEP}{conf.num_stores}"
                for bid in self.topic_brokers(conf)
                if self.serving(bid, name)
            ]
            if not items:
                continue
            size = conf.effective_max_msg_size(default)
            # capture s1/s6b: the size segment is empty for default-size topics
            size_text = "" if size == default else str(size)
            out.append(f"{name}{SEGMENT_SEP}{ARRAY_SEP.join(items)}{SEGMENT_SEP}{size_text}")
        return out

    def subscribable_partitions(self, topics: Iterable[str]) -> list[Partition]:
        parts: list[Partition] = []
        for name in sorted(topics):
            conf = self.meta.get(name)
            if conf is None or conf.closed or not conf.accept_subscribe:
                continue
            for bid in self.topic_brokers(conf):
                if not self.serving(bid, name):
                    continue
                host, port = self.broker_port(bid, False)
                parts.extend(Partition(bid, host, port, name, pid) for pid in conf.partition_ids())
        return parts

    def topic_meta(self, topics: Iterable[str]) -> dict[str, str]:
        """Client-balance ``topic#bid:stores:parts:status`` per topic (§4.2, capture s5)."""
        result = {}
        for name in sorted(topics):
            conf = self.meta.get(name)
            if conf is None:
                continue
            items = []
            for bid in self.topic_brokers(conf):
                status = int(self.online(bid) and conf.accept_subscribe and not conf.closed)
                items.append(f"{bid}:{conf.num_stores}:{conf.num_partitions}:{status}")
            if items:
                result[name] = f"{name}{SEGMENT_SEP}{ARRAY_SEP.join(items)}"
        return result

    def deployed(self, name: str) -> bool:
        return self.meta.get(name) is not None

    def partition_from_key(self, broker_id: int, topic: str, partition_id: int) -> Partition | None:
        if broker_id not in self.meta.brokers:
            return None
        host, port = self.broker_port(broker_id, False)
        return Partition(broker_id, host, port, topic, partition_id)

    def parse_part_sub_info(self, items: Iterable[str]) -> list[Partition]:
        """V2 ``partSubInfo`` ``topic#brokerId:partitionId,...`` -> partitions (unknown brokers skipped)."""
        parts = []
        for item in items:
            seg = item.split(SEGMENT_SEP)
            if len(seg) < 2 or not seg[0].strip():
                continue
            for kv in seg[1].split(ARRAY_SEP):
                bits = kv.split(ATTR_SEP)
                if len(bits) != 2:
                    continue
                try:
                    bid, pid = int(bits[0]), int(bits[1])
                except ValueError:
                    continue
                p = self.partition_from_key(bid, seg[0].strip(), pid)
                if p is not None:
                    parts.append(p)
        return parts
