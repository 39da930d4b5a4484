"""The master's group and session state: who is registered, which group they form, and the rules
that decide whether a new member fits its group (``ConsumerInfoHolder``/``ConsumeGroupInfo`` of the real
master). No protobuf and no sockets here: the RPC handlers (``master/__init__.py``) parse requests, call into
this module, and turn a :class:`BadParam` into the answer's errCode/errMsg.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from tubemq.protocol.constants import (
    ARRAY_SEP,
    ATTR_SEP,
    META_MAX_BOOKED_TOPIC_COUNT,
    META_VALUE_UNDEFINED,
    OFFSET_HISTORY_TOPIC,
    SEGMENT_SEP,
    ErrorCode,
)

CONSUME_UNBOUND = "unbound"
CONSUME_BOUND = "bound"
CONSUME_CLIENT_REB = "client-rebalance"

def java_set(items: Iterable[str]) -> str:
    """``java.util.Set.toString()`` of strings (sorted here for determinism)."""
    return "[" + ", ".join(sorted(items)) + "]"


def java_conditions(conds: dict[str, frozenset[str]]) -> str:
    """``Map<String, TreeSet<String>>.toString()``, e.g. ``{cap_err=[typeA]}``."""
    return "{" + ", ".join(f"{t}={java_set(v)}" for t, v in sorted(conds.items())) + "}"


class BadParam(Exception):
    """A failed check: errCode + errMsg for the response (never leaves the master)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def check_string(name: str, value: str, max_len: int) -> str:
    """PBParameterUtils.validStringParameter: trim, blank => 400, too long => 400 (capture texts)."""
    text = value.strip()
    if not text:
        raise BadParam(ErrorCode.BAD_REQUEST, f"Request miss necessary {name} data!")
    if len(text) > max_len:
        raise BadParam(
            ErrorCode.BAD_REQUEST, f"{name}'s length over max value, allowed max length is {max_len}"
        )
    return text


def check_producer_topics(topics: Iterable[str]) -> set[str]:
    result: set[str] = set()
    for t in topics:
        t = t.strip()
        if not t:
            continue
        if t == OFFSET_HISTORY_TOPIC:
            raise BadParam(
                ErrorCode.BAD_REQUEST,
                f"System Topic {OFFSET_HISTORY_TOPIC} does not allow client produce data!",
            )
        result.add(t)
    if len(result) > META_MAX_BOOKED_TOPIC_COUNT:
        raise BadParam(
            ErrorCode.BAD_REQUEST,
            f"Booked topic's count over max value, allowed max count is {META_MAX_BOOKED_TOPIC_COUNT}",
        )
    return result


def parse_conditions(items: Iterable[str]) -> dict[str, frozenset[str]]:
    """``topic#f1,f2`` items (DataConverterUtil.convertTopicConditions)."""
    conds: dict[str, set[str]] = {}
    for item in items:
        seg = item.split(SEGMENT_SEP)
        topic = seg[0].strip()
        if not topic:
            continue
        bucket = conds.setdefault(topic, set())
        if len(seg) > 1:
            bucket.update(f.strip() for f in seg[1].split(ARRAY_SEP) if f.strip())
    return {t: frozenset(v) for t, v in conds.items()}


@dataclass
class ProducerInfo:
    producer_id: str
    host: str
    topics: set[str]
    over_tls: bool
    last_seen: float


@dataclass
class ConsumerInfo:
    consumer_id: str
    group: str
    host: str
    remote_host: str
    over_tls: bool
    consume_type: str
    topics: frozenset[str]
    conditions: dict[str, frozenset[str]]
    session_key: str = ""
    source_count: int = META_VALUE_UNDEFINED
    node_id: int = META_VALUE_UNDEFINED
    select_big: bool = True
    #: bound consumption: ``requiredPartition`` as {partitionKey: offset} (ConsumerInfo.requiredPartition)
    required_partitions: dict[str, int] = field(default_factory=dict)
    session_time: int = META_VALUE_UNDEFINED
    lst_assigned_time: int = META_VALUE_UNDEFINED
    topic_meta_info_id: int = META_VALUE_UNDEFINED
    csm_from_max_ctrl_id: int = META_VALUE_UNDEFINED


@dataclass
class GroupInfo:
    name: str
    consume_type: str
    topics: frozenset[str]
    conditions: dict[str, frozenset[str]]
    consumers: dict[str, ConsumerInfo] = field(default_factory=dict)
    not_allocated: bool = True
    session_key: str = ""
    source_count: int = META_VALUE_UNDEFINED
    select_big: bool = True
    balanced: bool = False
    cur_client_rate: int = META_VALUE_UNDEFINED
    topic_meta_id: int = META_VALUE_UNDEFINED
    topic_meta: dict[str, str] = field(default_factory=dict)
    # bound consumption (ConsumeGroupInfo.partitionInfoMap / partOffsetMap / allocatedTimes)
    session_time: int = META_VALUE_UNDEFINED
    #: partitionKey -> consumer whose required offset won the partition (selectBig rule)
    bound_owner: dict[str, str] = field(default_factory=dict)
    #: partitionKey -> the winning required offset
    bound_offsets: dict[str, int] = field(default_factory=dict)
    allocated_times: int = 0
    check_cycle: int = 0

    @property
    def full_size(self) -> bool:
        """All ``sourceCount`` members are there (ConsumeGroupInfo.isGroupFullSize)."""
        return len(self.consumers) >= self.source_count

    @property
    def bound_unready(self) -> bool:
        """A bound group still waiting for (or in) its offset-reset allocation: the normal balance
        leaves it alone (ConsumeGroupInfo.isUnReadyServerBalance); its negation is
        ``isNotNeedBoundBalance``. Two reset attempts at most, so a reset that found none of the
        required partitions cannot hold the group forever."""
        return (
            self.consume_type == CONSUME_BOUND
            and self.not_allocated
            and bool(self.bound_owner)
            and self.allocated_times < 2
        )

    def book_bound(self, c: ConsumerInfo) -> None:
        """Record a new member's required offsets (ConsumeGroupInfo.bookPartitionInfo).

        A partition nobody asked for yet goes to this member; so does one whose owner left or did
        not name it. When two live members name the same partition, ``selectBig`` keeps the bigger
        offset (ties go to the newcomer), otherwise the strictly smaller one (ties stay)."""
        for key, offset in c.required_partitions.items():
            owner = self.consumers.get(self.bound_owner.get(key, ""))
            old = owner.required_partitions.get(key) if owner is not None else None
            if old is None or (offset >= old if self.select_big else offset < old):
                self.bound_owner[key] = c.consumer_id
                self.bound_offsets[key] = offset

    def forget_bound(self, consumer_id: str) -> None:
        """A member left: its won partitions and offsets go (ConsumeGroupInfo.removeConsumer)."""
        for key in [k for k, cid in self.bound_owner.items() if cid == consumer_id]:
            del self.bound_owner[key]
            self.bound_offsets.pop(key, None)


def check_required_partitions(topics: frozenset[str], text: str) -> dict[str, int]:
    """Bound consumption ``requiredPartition`` -> {partitionKey: offset}
    (PBParameterUtils.checkConsumerOffsetSetInfo: syntax and subscribed topics checked, 400 texts)."""
    out: dict[str, int] = {}
    if not text.strip():
        return out
    for item in text.strip().split(ARRAY_SEP):
        kv = item.split("=")
        fmt = f"[Parameter error] unformatted Partition-Offset value : {item} must be aa:bbb:ccc=val1,ddd:eee:ff=val2"
        if len(kv) == 1:
            raise BadParam(ErrorCode.BAD_REQUEST, fmt)
        key = kv[0].strip().split(ATTR_SEP)
        if len(key) != 3:
            raise BadParam(ErrorCode.BAD_REQUEST, fmt)
        if key[1].strip() not in topics:
            raise BadParam(
                ErrorCode.BAD_REQUEST,
                f"[Parameter error] wrong offset reset for unsubscribed topic: reset item is {item}, "
                f"request topicList are {java_set(topics)}",
            )
        try:
            out[kv[0].strip()] = java_long(kv[1].strip())
        except ValueError:
            raise BadParam(
                ErrorCode.BAD_REQUEST, f"[Parameter error] required long type value of {item}' Offset!"
            ) from None
    return out


def java_long(text: str) -> int:
    """``Long.parseLong``: optional sign and ASCII digits only, within the int64 range."""
    body = text[1:] if text[:1] in "+-" else text
    if not body or not body.isascii() or not body.isdigit():
        raise ValueError(text)
    value = int(text)
    if not -(2**63) <= value < 2**63:
        raise ValueError(text)
    return value

def check_filter_topics(
    consumer_id: str, topics: frozenset[str], conds: dict[str, frozenset[str]]
) -> None:
    stray = [t for t in conds if t not in topics]
    if stray:
        raise BadParam(ErrorCode.BAD_REQUEST, f"Filter's Topic not subscribed :{java_set(stray)}")

#: A setting every member of a group must share: (attribute, error code, Java's field name, how Java
#: prints the value); a bound group agrees on all three, a client-balanced one with sources on the count.
_BOUND_AGREEMENT: tuple[tuple[str, int, str, Callable[[Any], str]], ...] = (
    ("session_key", ErrorCode.CLIENT_INCONSISTENT_SESSIONKEY, "sessionKey", str),
    ("select_big", ErrorCode.CLIENT_INCONSISTENT_SELECTBIG, "isSelectBig", lambda v: str(v).lower()),
    ("source_count", ErrorCode.CLIENT_INCONSISTENT_SOURCECOUNT, "sourceCount", str),
)


def _check_agreement(
    head: str, g: GroupInfo, c: ConsumerInfo, settings: tuple[tuple[str, int, str, Callable[[Any], str]], ...]
) -> None:
    for attr, code, java_name, show in settings:
        want, got = getattr(g, attr), getattr(c, attr)
        if want != got:
            raise BadParam(
                code,
                f"{head}'s {java_name} is inconsistency with other consumers in the group, required is "
                f"{show(want)}, request is {show(got)}",
            )


def valid_consumer(g: GroupInfo, c: ConsumerInfo) -> None:
    """ConsumeGroupInfo.validConsumerInfo texts (424-430)."""
    head = f"[Inconsistency subscribe] {c.consumer_id}"
    if c.consume_type != g.consume_type:
        raise BadParam(
            ErrorCode.CLIENT_INCONSISTENT_CONSUMETYPE,
            f"{head} using {c.consume_type} subscribe is inconsistency with other consumers using "
            f"{g.consume_type} subscribe in the group",
        )
    if g.topics and g.topics != c.topics:
        raise BadParam(
            ErrorCode.CLIENT_INCONSISTENT_TOPICSET,
            f"{head} subscribed topics {java_set(c.topics)} is inconsistency with other consumers in the "
            f"group, existedTopics: {java_set(g.topics)}",
        )
    if not g.conditions:
        if c.conditions:
            raise BadParam(
                ErrorCode.CLIENT_INCONSISTENT_FILTERSET,
                f"{head} subscribe with filter condition {java_conditions(c.conditions)} is inconsistency "
                "with other consumers in the group: topic without conditions",
            )
    elif not c.conditions:
        raise BadParam(
            ErrorCode.CLIENT_INCONSISTENT_FILTERSET,
            f"{head} subscribe without filter condition  is inconsistency with other consumers in the "
            f"group, existed topic conditions is {java_conditions(g.conditions)}",
        )
    elif g.conditions != c.conditions:
        raise BadParam(
            ErrorCode.CLIENT_INCONSISTENT_FILTERSET,
            f"{head} subscribe with filter condition {java_conditions(c.conditions)} is inconsistency with "
            f"other consumers in the group, existed topic conditions is {java_conditions(g.conditions)}",
        )
    if g.consume_type == CONSUME_BOUND:
        _check_agreement(head, g, c, _BOUND_AGREEMENT)
    elif g.consume_type == CONSUME_CLIENT_REB and g.source_count > 0:
        _check_agreement(head, g, c, _BOUND_AGREEMENT[2:])
        for other in g.consumers.values():
            if other.node_id == c.node_id and other.consumer_id != c.consumer_id:
                raise BadParam(
                    ErrorCode.CLIENT_DUPLICATE_INDEXID,
                    f"{head}'s nodeId value({c.node_id}) is occupied by {other.consumer_id}'s nodeId "
                    f"value({other.node_id}) in the group!",
                )


class GroupRegistry:
    """Producers, consumer groups and the consumers' heartbeat records (``HeartbeatManager``)."""

    def __init__(self) -> None:
        self.producers: dict[str, ProducerInfo] = {}
        self.groups: dict[str, GroupInfo] = {}
        #: consumer heartbeat records keyed ``consumerId@group``, value = last seen (monotonic).
        self.heartbeats: dict[str, float] = {}

    def add_consumer(self, info: ConsumerInfo) -> tuple[GroupInfo, bool]:
        """ConsumerInfoHolder.addConsumer: the first member fixes the group; later ones must match.

        Returns the group and whether this call created it (a new group)."""
        g = self.groups.get(info.group)
        if g is None or not g.consumers:
            g = GroupInfo(info.group, info.consume_type, info.topics, dict(info.conditions))
            if info.consume_type == CONSUME_BOUND:
                g.session_key, g.source_count, g.select_big, g.session_time = (
                    info.session_key,
                    info.source_count,
                    info.select_big,
                    info.session_time,
                )
            elif info.consume_type == CONSUME_CLIENT_REB:
                g.source_count = info.source_count
            self.groups[info.group] = g
            g.consumers[info.consumer_id] = info
            if info.consume_type == CONSUME_BOUND:
                g.book_bound(info)
            return g, True
        valid_consumer(g, info)
        known = info.consumer_id in g.consumers
        if info.consume_type == CONSUME_BOUND:
            # Java books only new members' offsets; a re-registering bound member keeps its record
            # (ConsumerInfo.updCurConsumerInfo changes client-balance members only)
            if not known:
                g.consumers[info.consumer_id] = info
                g.book_bound(info)
            return g, False
        g.consumers[info.consumer_id] = info  # a re-register of a member updates it
        return g, False

    def seen(self, cid: str, group: str) -> None:
        """Start (register) or refresh the consumer's heartbeat record."""
        self.heartbeats[f"{cid}@{group}"] = time.monotonic()

    def lookup_group(self, group: str) -> GroupInfo:
        g = self.groups.get(group)
        if g is None:
            raise BadParam(ErrorCode.HB_NO_NODE, f"Not found groupName {group} in holder!")
        return g

    def lookup_member(self, cid: str, group: str) -> tuple[GroupInfo, ConsumerInfo]:
        g = self.lookup_group(group)
        consumer = g.consumers.get(cid)
        if consumer is None:
            raise BadParam(ErrorCode.HB_NO_NODE, f"Not found client {cid} in group({group})")
        return g, consumer

    def touch_consumer(self, cid: str, group: str) -> None:
        key = f"{cid}@{group}"
        if key not in self.heartbeats:
            raise BadParam(
                ErrorCode.HB_NO_NODE,
                f"Update consumer node exception:Invalid node id:{key}, you have to append node first!",
            )
        self.heartbeats[key] = time.monotonic()

    def release_consumer(self, cid: str, group: str) -> None:
        """Close or timeout: forget the member; drop an empty group."""
        self.heartbeats.pop(f"{cid}@{group}", None)
        g = self.groups.get(group)
        if g is not None:
            g.consumers.pop(cid, None)
            g.forget_bound(cid)
            if not g.consumers:
                del self.groups[group]

    def expired_producers(self, now: float, limit_s: float) -> list[str]:
        return [pid for pid, info in self.producers.items() if now - info.last_seen > limit_s]

    def expired_consumers(self, now: float, limit_s: float) -> list[tuple[str, str]]:
        out = []
        for key, seen in self.heartbeats.items():
            if now - seen > limit_s:
                cid, _, group = key.partition("@")
                out.append((cid, group))
        return out
