"""Typed answers of the admin client (dataclasses over the web APIs' JSON).

Each keeps the answer it was built from in ``raw``, so a field the real master or broker adds later is
still reachable without a client upgrade. Partition ids are TubeMQ's: ``store index * 10000 + partition``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")


class BrokerResults(list[T]):
    """A list answer gathered from several brokers' web APIs, with the brokers that did not answer.

    ``unreachable`` maps a broker id to why its web API could not be reached (refused, timed out):
    such a broker is skipped, so the list holds what the others answered and nothing of it changed
    there. Empty when every broker answered.
    """

    def __init__(self, items: Any = ()) -> None:
        super().__init__(items)
        self.unreachable: dict[int, str] = {}


def _int(value: Any, default: int = -1) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return default
    return default


def _bool(value: Any) -> bool | None:
    """The APIs answer booleans as JSON booleans or as ``"true"``/``"false"``/``"-"`` (unknown)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    return None


@dataclass(frozen=True)
class TopicDeployment:
    """One broker's deployment of a topic (``topicInfo[i]`` of ``admin_query_topic_info``)."""

    broker_id: int
    broker_ip: str
    broker_port: int
    num_partitions: int
    num_stores: int
    accept_publish: bool | None
    accept_subscribe: bool | None
    status_id: int
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def partition_ids(self) -> list[int]:
        """Every partition id of this deployment (store index * 10000 + partition)."""
        return [s * 10000 + p for s in range(max(self.num_stores, 1)) for p in range(self.num_partitions)]

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TopicDeployment:
        return cls(
            broker_id=_int(d.get("brokerId")),
            broker_ip=str(d.get("brokerIp") or ""),
            broker_port=_int(d.get("brokerPort")),
            num_partitions=_int(d.get("numPartitions"), 0),
            num_stores=_int(d.get("numTopicStores"), 1),
            accept_publish=_bool(d.get("acceptPublish")),
            accept_subscribe=_bool(d.get("acceptSubscribe")),
            status_id=_int(d.get("topicStatusId"), 0),
            raw=d,
        )


@dataclass(frozen=True)
class TopicInfo:
    """A topic as ``admin_query_topic_info`` describes it: cluster-wide flags and its deployments."""

    name: str
    max_msg_size_mb: int | None
    accept_publish: bool | None
    accept_subscribe: bool | None
    total_partitions: int
    deployments: tuple[TopicDeployment, ...]
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def broker_ids(self) -> list[int]:
        return [d.broker_id for d in self.deployments]

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TopicInfo:
        infos = d.get("topicInfo")
        deps = tuple(TopicDeployment.from_json(i) for i in infos if isinstance(i, dict)) if isinstance(infos, list) else ()
        size = d.get("maxMsgSizeInMB")
        if size is None and deps:
            size = deps[0].raw.get("maxMsgSizeInMB")
        total = _int(d.get("totalCfgNumPart"), sum(x.num_partitions * x.num_stores for x in deps))
        return cls(
            name=str(d.get("topicName") or ""),
            max_msg_size_mb=_int(size) if size is not None else None,
            accept_publish=_bool(d.get("isSrvAcceptPublish", d.get("acceptPublish"))),
            accept_subscribe=_bool(d.get("isSrvAcceptSubscribe", d.get("acceptSubscribe"))),
            total_partitions=total,
            deployments=deps,
            raw=d,
        )


@dataclass(frozen=True)
class BrokerStatus:
    """One broker of ``admin_query_broker_run_status``; run-state flags are None when unknown (``"-"``)."""

    broker_id: int
    broker_ip: str
    broker_port: int
    web_port: int
    manage_status: str
    run_status: str
    online: bool | None
    accept_publish: bool | None
    accept_subscribe: bool | None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def web_url(self) -> str | None:
        """The broker's web API (``BrokerAdminServlet``), when its address and web port are known."""
        if not self.broker_ip or self.web_port <= 0:
            return None
        return f"http://{self.broker_ip}:{self.web_port}/webapi.htm"

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> BrokerStatus:
        return cls(
            broker_id=_int(d.get("brokerId")),
            broker_ip=str(d.get("brokerIp") or ""),
            broker_port=_int(d.get("brokerPort")),
            web_port=_int(d.get("brokerWebPort")),
            manage_status=str(d.get("manageStatus") or ""),
            run_status=str(d.get("runStatus") or ""),
            online=_bool(d.get("isBrokerOnline")),
            accept_publish=_bool(d.get("acceptPublish")),
            accept_subscribe=_bool(d.get("acceptSubscribe")),
            raw=d,
        )


@dataclass(frozen=True)
class MemberPartition:
    topic: str
    broker_id: int
    partition_id: int


@dataclass(frozen=True)
class GroupMember:
    """One consumer of a group (``data[i]`` of ``admin_query_consume_group_detail``)."""

    consumer_id: str
    address: str
    over_tls: bool | None
    partitions: tuple[MemberPartition, ...]
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> GroupMember:
        parts = []
        for p in d.get("parInfo") or []:
            if isinstance(p, dict):
                addr = str(p.get("brokerAddr") or "")  # "brokerId:host:port"
                parts.append(MemberPartition(str(p.get("topicName") or ""), _int(addr.split(":", 1)[0]), _int(p.get("partId"))))
        return cls(str(d.get("consumerId") or ""), str(d.get("receivedFrom") or ""), _bool(d.get("isOverTLS")),
                   tuple(parts), d)


@dataclass(frozen=True)
class GroupDetail:
    """``admin_query_consume_group_detail``: the group's topics, consume mode (``"unbound"``,
    ``"bound"``, ``"client-rebalance"``) and members."""

    group: str
    topics: tuple[str, ...]
    consume_type: str
    rebalanced: bool | None
    members: tuple[GroupMember, ...]
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> GroupDetail:
        reb = d.get("rebInfo")
        return cls(
            group=str(d.get("consumeGroup") or ""),
            topics=tuple(str(t) for t in d.get("topicSet") or []),
            consume_type=str(d.get("isBandConsume", "")),
            rebalanced=_bool(reb.get("isRebalanced")) if isinstance(reb, dict) else None,
            members=tuple(GroupMember.from_json(m) for m in d.get("data") or [] if isinstance(m, dict)),
            raw=d,
        )


@dataclass(frozen=True)
class PartitionOffset:
    """A group's position on one partition (``GroupOffsetInfo`` of the broker web API).

    ``offset`` is the committed (``curOffset``) index offset, ``lag`` = ``max_offset - offset`` in
    TubeMQ's index units (bytes of the store's index, 28 per entry; -2, TubeMQ's undefined, where the
    broker has no value). The index is shared by the partitions of a store, so ``lag`` counts the
    siblings' entries too. ``lag_messages`` is the lag in messages where that can be known (the
    partition is alone in its store: ``lag / 28``), else None.
    """

    group: str
    topic: str
    broker_id: int
    partition_id: int
    offset: int
    flight_offset: int
    max_offset: int
    lag: int
    data_offset: int
    data_max: int
    data_lag: int
    lag_messages: int | None = None

    @property
    def lag_index_bytes(self) -> int:
        """``lag``, named by its unit."""
        return self.lag

    @property
    def key(self) -> str:
        """TubeMQ's partition key ``brokerId:topicName:partitionId`` (as in ``offsetJsonInfo``)."""
        return f"{self.broker_id}:{self.topic}:{self.partition_id}"

    @classmethod
    def from_json(cls, group: str, topic: str, broker_id: int, d: dict[str, Any]) -> PartitionOffset:
        return cls(
            group=group, topic=topic, broker_id=broker_id, partition_id=_int(d.get("partitionId")),
            offset=_int(d.get("curOffset"), -2), flight_offset=_int(d.get("flightOffset"), -2),
            max_offset=_int(d.get("offsetMax"), -2), lag=_int(d.get("offsetLag"), -2),
            data_offset=_int(d.get("curDataOffset"), -2), data_max=_int(d.get("dataMax"), -2),
            data_lag=_int(d.get("dataLag"), -2),
        )


@dataclass(frozen=True)
class PartitionOffsetDetail:
    """``admin_query_group_offset``: one partition's store bounds and the group's offsets on it."""

    tmp_offset: int
    min_offset: int
    max_offset: int
    min_data_offset: int
    max_data_offset: int
    zk_offset: int | None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> PartitionOffsetDetail:
        return cls(_int(d.get("tmpOffset")), _int(d.get("minOffset")), _int(d.get("maxOffset")),
                   _int(d.get("minDataOffset")), _int(d.get("maxDataOffset")),
                   _int(d["zkOffset"]) if "zkOffset" in d else None, d)


@dataclass(frozen=True)
class TimeOffset:
    """Where a timestamp falls in a partition: the first index offset appended at or after it."""

    topic: str
    broker_id: int
    partition_id: int
    timestamp_ms: int
    offset: int

    @property
    def key(self) -> str:
        return f"{self.broker_id}:{self.topic}:{self.partition_id}"
