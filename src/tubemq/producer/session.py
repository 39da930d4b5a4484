"""The producer's master session (docs/PROTOCOL.md §3.3, §5.1): register, heartbeat, publish, close.

Request shapes follow the real Java client exactly (captures/s1_producer.json): register carries
clientId, brokerCheckSum (-1 at first), hostName, jdkVersion and appdConfig{configId}, topicList only
when topics are already published (re-register); heartbeats carry the same plus topicList; close
carries clientId only. authInfo is present only when authentication is configured.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable

from .. import codec
from ..client.session import RUNTIME_VERSION, MasterSessionBase
from ..errors import DecodeError, TopicNotPublishedError
from ..protocol import master_pb
from ..protocol.constants import OFFSET_HISTORY_TOPIC, ErrorCode, Method

log = logging.getLogger("tubemq.producer.session")


class ProducerSession(MasterSessionBase):
    """Producer specifics on top of :class:`MasterSessionBase`: published topics and partitions."""

    role = "producer"

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.topics: dict[str, int] = {}  # published topic -> reference count
        self.partitions: dict[str, list[codec.Partition]] = {}
        self.topic_max_sizes: dict[str, int] = {}
        self.metadata_version = 0
        #: bumped after every change of what a send is routed by (published topics, their partitions,
        #: broker addresses, size limits): callers' threads cache routes under it (tubemq._bridge).
        #: Written by the loop thread only, after the change it announces.
        self.route_gen = 0
        self._routed_max_size = self.max_msg_size
        self.on_metadata: list[Callable[[], object]] = []
        self._last_forced_hb = 0.0

    # ------------------------------------------------------------------ metadata

    def should_heartbeat(self) -> bool:
        return bool(self.topics)  # Java skips heartbeats while nothing is published

    def max_size(self, topic: str) -> int:
        return self.topic_max_sizes.get(topic, self.max_msg_size)

    async def publish(self, topics: Iterable[str]) -> set[str]:
        """Add topics; new ones trigger one heartbeat now. Returns the topics that have partitions.

        Raises TopicNotPublishedError when none of the requested topics has a partition (unknown
        topic, or no broker accepts publishing for it); unknown topics are dropped again so that
        heartbeats do not keep carrying them.
        """
        wanted = []
        for t in topics:
            if not isinstance(t, str) or not t.strip():
                raise TopicNotPublishedError(ErrorCode.PARAMETER_MSG_TOPIC_BLANK, f"bad topic name {t!r}")
            t = t.strip()
            if t == OFFSET_HISTORY_TOPIC:
                raise TopicNotPublishedError(ErrorCode.PARAMETER_MSG_TOPIC_UNPUBLISHED, f"{t} is a system topic")
            wanted.append(t)
        new = [t for t in dict.fromkeys(wanted) if t not in self.topics]
        for t in wanted:
            self.topics[t] = self.topics.get(t, 0) + 1
        self.route_gen += 1
        if new or any(not self.partitions.get(t) for t in wanted):
            try:
                await self.heartbeat_now()
            except BaseException:
                self._unpublish(wanted)
                raise
        ok = {t for t in wanted if self.partitions.get(t)}
        missing = [t for t in dict.fromkeys(wanted) if t not in ok]
        if missing:
            self._unpublish(missing, all_refs=True)
            if not ok:
                raise TopicNotPublishedError(
                    ErrorCode.PARAMETER_MSG_TOPIC_UNPUBLISHED,
                    f"Publish topic failure: {', '.join(missing)} has no partition; make sure the topic exists "
                    "and accepts publishing",
                )
        return ok

    def _unpublish(self, topics: Iterable[str], all_refs: bool = False) -> None:
        for t in topics:
            n = self.topics.get(t)
            if n is None:
                continue
            if all_refs or n <= 1:
                del self.topics[t]
            else:
                self.topics[t] = n - 1
        self.route_gen += 1

    async def refresh(self, min_interval: float = 1.0) -> None:
        """A rate-limited extra heartbeat (a published topic lost its partitions)."""
        now = time.monotonic()
        if now - self._last_forced_hb < min_interval:
            await asyncio.sleep(0)
            return
        self._last_forced_hb = now
        await self.heartbeat_now()

    # ------------------------------------------------------------------ requests

    async def _register_once(self) -> None:
        req = master_pb.RegisterRequestP2M(
            clientId=self.client_id,
            topicList=list(self.topics),
            brokerCheckSum=self.broker_checksum,
            hostName=self.host_name,
            jdkVersion=RUNTIME_VERSION,
            appdConfig=self.appd_config(),
        )
        self.add_cert(req, force=True)
        rsp = await self.call_master(Method.MASTER_PRODUCER_REGISTER, req, master_pb.RegisterResponseM2P)
        self.check(rsp)
        self.apply_authorized_info(rsp)
        self.apply_appd_config(rsp)
        if self.apply_brokers(rsp.brokerCheckSum, rsp.brokerInfos):
            self._rebuild_partitions_for_new_brokers()
        self.route_gen += 1  # (a new session: its limits and brokers)

    async def _heartbeat_once(self) -> None:
        req = master_pb.HeartRequestP2M(
            clientId=self.client_id,
            brokerCheckSum=self.heartbeat_checksum(),
            hostName=self.host_name,
            topicList=list(self.topics),
            appdConfig=self.appd_config(),
        )
        self.add_cert(req, force=False)
        rsp = await self.call_master(Method.MASTER_PRODUCER_HEARTBEAT, req, master_pb.HeartResponseM2P)
        self.check(rsp)
        if rsp.HasField("requireAuth"):  # absent: keep a 415-triggered full authentication (as consumers)
            self.require_auth = rsp.requireAuth
        self.apply_appd_config(rsp)
        self.apply_authorized_info(rsp)
        if rsp.errCode == ErrorCode.NOT_READY:
            return  # Java: success with 201 means "no metadata change"
        self.apply_brokers(rsp.brokerCheckSum, rsp.brokerInfos)
        try:
            parts, sizes = codec.parse_topic_info(rsp.topicInfos, self.brokers,
                                                  max_partitions=self.config.max_partitions,
                                                  max_total_partitions=self.config.max_total_partitions)
        except DecodeError as exc:
            log.warning("ignoring a heartbeat answer with bad topicInfos: %s", exc)
            return
        by_topic: dict[str, list[codec.Partition]] = {}
        for p in parts:
            by_topic.setdefault(p.topic, []).append(p)
        for plist in by_topic.values():
            plist.sort(key=lambda p: (p.broker_id, p.partition_id))
        # the answer is the complete picture: replace wholesale (§4.2)
        same = (by_topic == self.partitions and sizes == self.topic_max_sizes
                and self.max_msg_size == self._routed_max_size)
        self._routed_max_size = self.max_msg_size
        self.partitions = by_topic
        self.topic_max_sizes = sizes
        self.metadata_version += 1
        if not same:
            self.route_gen += 1
        for cb in self.on_metadata:
            try:
                cb()
            except Exception:
                log.exception("metadata listener failed")

    def _rebuild_partitions_for_new_brokers(self) -> None:
        """Broker addresses changed: re-point existing partitions (ids stay)."""
        rebuilt: dict[str, list[codec.Partition]] = {}
        for topic, plist in self.partitions.items():
            new = []
            for p in plist:
                b = self.brokers.get(p.broker_id)
                if b is not None:
                    new.append(codec.Partition(b.broker_id, b.host, b.port, p.topic, p.partition_id))
            if new:
                rebuilt[topic] = new
        self.partitions = rebuilt
        self.route_gen += 1

    async def _close_once(self) -> None:
        req = master_pb.CloseRequestP2M(clientId=self.client_id)
        self.add_cert(req, force=True)
        rsp = await self.call_master(Method.MASTER_PRODUCER_CLOSE, req, master_pb.CloseResponseM2P)
        if not rsp.success:
            log.info("master answered the close with %s %s", rsp.errCode, rsp.errMsg)


__all__ = ["ProducerSession"]
