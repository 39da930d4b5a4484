"""The twin's metadata strings (§4.1 - §4.3): brokers, topicInfo, partitions, subscriptions."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ...errors import DecodeError
from ...protocol.constants import DEFAULT_BROKER_PORT, META_STORE_INS_BASE
from .datatypes import BrokerInfo, Partition, SubscribeInfo

#: Default cap on the partitions one topic's topicInfo / topicMetaInfo entries may expand to: real
#: deployments have at most a few thousand; a hostile ``t#1:999:999`` would otherwise build ~1M objects.
DEFAULT_MAX_PARTITIONS = 10_000
#: Default cap on all partitions one parse call may build (every topic of a metadata answer together).
DEFAULT_MAX_TOTAL_PARTITIONS = 200_000


def parse_broker_info(text: str, default_port: int = DEFAULT_BROKER_PORT) -> BrokerInfo:
    """``brokerId:host:port``; a blank (or missing) port means the default port."""
    parts = text.strip().split(":")
    if len(parts) < 2 or not parts[0].strip() or not parts[1].strip():
        raise DecodeError(f"bad brokerInfo {text!r}")
    try:
        broker_id = int(parts[0])
        port = int(parts[2]) if len(parts) > 2 and parts[2].strip() else default_port
    except ValueError as exc:
        raise DecodeError(f"bad brokerInfo {text!r}") from exc
    return BrokerInfo(broker_id, parts[1].strip(), port)


def check_partition_count(
    topic: str, parts: int, stores: int, topic_count: int, total: int, max_partitions: int, max_total: int
) -> int:
    """The partitions ``parts`` x ``stores`` adds to a topic, or DecodeError over a cap (before allocating).

    ``topic_count``/``total`` are what the topic and the whole parse already hold.
    """
    if parts <= 0 or stores <= 0:
        if parts > max_partitions or stores > max_partitions:
            raise DecodeError(f"topic {topic!r}: {stores} stores x {parts} partitions over the limit {max_partitions}")
        return 0
    if parts > max_partitions or stores > max_partitions or topic_count + parts * stores > max_partitions:
        raise DecodeError(
            f"topic {topic!r}: {topic_count + parts * stores} partitions over the limit {max_partitions}"
            " (max_partitions)"
        )
    if total + parts * stores > max_total:
        raise DecodeError(f"metadata with more than {max_total} partitions (max_total_partitions)")
    return parts * stores


class PartitionBudget:
    """The partition caps of one parse call: per topic (across all its entries) and in all.

    Per-topic counts are kept only once the call holds more than ``max_partitions`` partitions in all
    (below that no topic can be over), so the usual metadata answer costs no bookkeeping.
    """

    __slots__ = ("max_partitions", "max_total", "meta", "counts", "counted")

    def __init__(self, max_partitions: int, max_total: int, meta: bool = False) -> None:
        self.max_partitions = max_partitions
        self.max_total = max_total
        self.meta = meta  # items are (Partition, subscribable) pairs
        self.counts: dict[str, int] = {}
        self.counted = 0

    def check(self, topic: str, parts: int, stores: int, count: int, start: int, items: list[Any]) -> int:
        """What ``parts`` x ``stores`` adds to ``topic``, or DecodeError (``count``: this entry's so far,
        ``start``: ``len(items)`` when the entry began)."""
        prior = 0
        if 0 < parts <= self.max_partitions and 0 < stores <= self.max_partitions and start > 0 and (
            start + count + parts * stores > self.max_partitions
        ):
            for item in items[self.counted : start]:
                key = item[0].topic if self.meta else item.topic
                self.counts[key] = self.counts.get(key, 0) + 1
            self.counted = max(self.counted, start)
            prior = self.counts.get(topic, 0)
        return check_partition_count(
            topic, parts, stores, prior + count, len(items), self.max_partitions, self.max_total
        )


def _known_items(
    items: str, width: int, what: str, text: str, width_context: str, brokers: Mapping[int, BrokerInfo]
) -> Iterator[tuple[BrokerInfo, list[int]]]:
    """The ``bid:n:...`` items of one topic entry as ints, with their broker; unknown brokers skipped.

    One reader for topicInfo and topicMetaInfo items, so both reject malformed numbers alike.
    """
    for item in items.split(","):
        if not item:
            continue
        fields = item.split(":")
        if len(fields) != width:
            raise DecodeError(f"bad {what} item {item!r}{width_context}")
        try:
            numbers = [int(x) for x in fields]
        except ValueError as exc:
            raise DecodeError(f"bad {what} item {item!r} in {text!r}") from exc
        broker = brokers.get(numbers[0])
        if broker is not None:
            yield broker, numbers


def _store_partitions(broker: BrokerInfo, bid: int, topic: str, stores: int, parts: int) -> Iterator[Partition]:
    """The partitions ``stores`` x ``parts`` of one topic on one broker (none when ``parts`` <= 0)."""
    for s in range(stores if parts > 0 else 0):
        for i in range(parts):
            yield Partition(bid, broker.host, broker.port, topic, s * META_STORE_INS_BASE + i)


def topic_info_entry(
    text: str,
    brokers: Mapping[int, BrokerInfo],
    partitions: list[Partition],
    sizes: dict[str, int],
    budget: PartitionBudget,
) -> None:
    """One ``topic#bid:parts:stores,...[#maxsize]`` entry appended to ``partitions``/``sizes``."""
    segs = text.split("#")
    if len(segs) < 2 or not segs[0]:
        raise DecodeError(f"bad topicInfo {text!r}")
    topic = segs[0]
    if len(segs) > 2 and segs[2].strip():
        try:
            size = int(segs[2])
        except ValueError as exc:
            raise DecodeError(f"bad max size in topicInfo {text!r}") from exc
    else:
        size = None
    count = 0
    start = len(partitions)
    for broker, (bid, parts, stores) in _known_items(segs[1], 3, "topicInfo", text, f" in {text!r}", brokers):
        count += budget.check(topic, parts, stores, count, start, partitions)
        partitions.extend(_store_partitions(broker, bid, topic, stores, parts))
    if size is not None:
        sizes[topic] = size


def parse_topic_info(
    topic_infos: Iterable[str],
    brokers: Mapping[int, BrokerInfo],
    *,
    max_partitions: int = DEFAULT_MAX_PARTITIONS,
    max_total_partitions: int = DEFAULT_MAX_TOTAL_PARTITIONS,
) -> tuple[list[Partition], dict[str, int]]:
    """Expand producer topicInfos into partitions; returns (partitions, {topic: max size}).

    A topic expanding to more than ``max_partitions`` partitions (over all its entries), or a call to
    more than ``max_total_partitions``, raises DecodeError before the excess is built.
    """
    partitions: list[Partition] = []
    sizes: dict[str, int] = {}
    budget = PartitionBudget(max_partitions, max_total_partitions)
    for text in topic_infos:
        topic_info_entry(text, brokers, partitions, sizes, budget)
    return partitions, sizes


def parse_topic_meta_info(
    topic_metas: Iterable[str],
    brokers: Mapping[int, BrokerInfo],
    *,
    max_partitions: int = DEFAULT_MAX_PARTITIONS,
    max_total_partitions: int = DEFAULT_MAX_TOTAL_PARTITIONS,
) -> list[tuple[Partition, bool]]:
    """Client-balance ``topic#brokerId:storeNum:partNum:statusId`` -> [(partition, subscribable)].

    The same caps as :func:`parse_topic_info`; malformed numbers raise DecodeError.
    """
    result: list[tuple[Partition, bool]] = []
    budget = PartitionBudget(max_partitions, max_total_partitions, meta=True)
    for text in topic_metas:
        segs = text.split("#")
        if len(segs) < 2 or not segs[0]:
            raise DecodeError(f"bad topicMetaInfo {text!r}")
        topic = segs[0]
        count = 0
        start = len(result)
        for broker, (bid, stores, parts, status) in _known_items(segs[1], 4, "topicMetaInfo", text, "", brokers):
            count += budget.check(topic, parts, stores, count, start, result)
            result.extend((p, status == 1) for p in _store_partitions(broker, bid, topic, stores, parts))
    return result


def parse_partition(text: str) -> Partition:
    """Partition string ``brokerId:host:port#topic:partitionId`` (§4.3, §4.4)."""
    segs = text.split("#")
    if len(segs) != 2:
        raise DecodeError(f"bad partition string {text!r}")
    broker = parse_broker_info(segs[0])
    tp = segs[1].rsplit(":", 1)
    if len(tp) != 2 or not tp[0]:
        raise DecodeError(f"bad partition string {text!r}")
    try:
        pid = int(tp[1])
    except ValueError as exc:
        raise DecodeError(f"bad partition id in {text!r}") from exc
    return Partition(broker.broker_id, broker.host, broker.port, tp[0], pid)


def parse_subscribe_info(text: str) -> SubscribeInfo:
    """``consumerId@group#brokerId:host:port#topic:partitionId``."""
    segs = text.split("#")
    if len(segs) != 3:
        raise DecodeError(f"bad subscribeInfo {text!r}")
    cg = segs[0].split("@")
    if len(cg) != 2:
        raise DecodeError(f"bad subscribeInfo {text!r}")
    return SubscribeInfo(cg[0], cg[1], parse_partition(segs[1] + "#" + segs[2]))
