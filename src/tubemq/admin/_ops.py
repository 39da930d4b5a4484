"""Every admin operation once, as a generator that yields :class:`Request` s and receives answers.

Why generators: the sync and the asyncio client drive the same code (one ``send`` per yielded request,
a blocking or an awaited call in between), so the two can never disagree on parameters or parsing.
Master calls go to the master's ``webapi.htm``; group-offset calls go to every online broker's web API
(``BrokerAdminServlet``), whose address the master's ``admin_query_broker_run_status`` gives.
"""

from __future__ import annotations

import datetime as _dt
import json
import time
from collections.abc import Generator, Iterable, Mapping
from typing import Any, TypeVar

from tubemq.errors import AdminError, ConfigError

from ._http import Request
from .types import (
    BrokerStatus,
    GroupDetail,
    PartitionOffset,
    PartitionOffsetDetail,
    TimeOffset,
    TopicInfo,
    _int,
)

T = TypeVar("T")
Op = Generator[Request, dict[str, Any], T]

#: The embedded server's time lookup (no real TubeMQ broker serves it: see offsets_for_times).
TIME_LOOKUP_METHOD = "admin_query_offset_by_time"
#: Asked for "latest": the brokers clamp a set offset into [min, max] (MixedUtils.mid), so this is max.
_LATEST = 1 << 62


def _rows(answer: dict[str, Any], key: str = "data") -> list[dict[str, Any]]:
    data = answer.get(key)
    return [d for d in data if isinstance(d, dict)] if isinstance(data, list) else []


def _stamp() -> str:
    return time.strftime("%Y%m%d%H%M%S")


def _csv(values: str | Iterable[str] | None) -> str | None:
    if values is None:
        return None
    if isinstance(values, str):
        return values
    text = ",".join(str(v) for v in values)
    return text or None


def record_time(when: _dt.datetime | int | float | str) -> str:
    """A time for ``recordTime``: datetime (naive = local), epoch milliseconds, or ``yyyyMMddHHmmss``."""
    if isinstance(when, str):
        if len(when) != 14 or not when.isdigit():
            raise ConfigError("record_time", f"expected yyyyMMddHHmmss, got {when!r}")
        return when
    return _as_datetime(when).strftime("%Y%m%d%H%M%S")


def _as_datetime(when: _dt.datetime | int | float) -> _dt.datetime:
    if isinstance(when, _dt.datetime):
        return when.astimezone() if when.tzinfo else when
    return _dt.datetime.fromtimestamp(when / 1000.0)


def timestamp_ms(when: _dt.datetime | int | float) -> int:
    """Epoch milliseconds of a datetime (naive = local time) or of a number of milliseconds."""
    if isinstance(when, _dt.datetime):
        return int(when.timestamp() * 1000)
    if isinstance(when, bool) or not isinstance(when, int | float):
        raise ConfigError("timestamp", f"expected a datetime or epoch milliseconds, got {when!r}")
    return int(when)


class Ctx:
    """What every operation needs besides its arguments: the user name and broker web URL overrides."""

    def __init__(self, user: str, broker_urls: Mapping[int, str] | None) -> None:
        self.user = user
        self.broker_urls = dict(broker_urls or {})


# ---- topics (master: WebTopicDeployHandler / WebTopicCtrlHandler)


def list_topics(names: str | Iterable[str] | None = None) -> Op[list[TopicInfo]]:
    answer = yield Request("op_query", "admin_query_topic_info", {"topicName": _csv(names)})
    return [TopicInfo.from_json(d) for d in _rows(answer)]


def describe_topic(name: str) -> Op[TopicInfo]:
    topics = yield from list_topics(name)
    for t in topics:
        if t.name == name:
            return t
    raise AdminError(404, f"topic {name} not found", "admin_query_topic_info")


def create_topic(
    ctx: Ctx, name: str, *, partitions: int, stores: int, broker_ids: str | Iterable[int] | None,
    max_msg_size_mb: int | None, accept_publish: bool, accept_subscribe: bool,
) -> Op[dict[str, Any]]:
    ids = _csv([str(b) for b in broker_ids] if broker_ids is not None and not isinstance(broker_ids, str) else broker_ids)
    return (yield Request("op_modify", "admin_add_new_topic_record", {
        "topicName": name, "brokerId": ids or "1", "numPartitions": partitions, "numTopicStores": stores,
        "maxMsgSizeInMB": max_msg_size_mb, "acceptPublish": accept_publish, "acceptSubscribe": accept_subscribe,
        "createUser": ctx.user, "createDate": _stamp(),
    }))


def update_topic(
    ctx: Ctx, names: str | Iterable[str], *, max_msg_size_mb: int | None, partitions: int | None,
    accept_publish: bool | None, accept_subscribe: bool | None, broker_ids: str | Iterable[int] | None,
) -> Op[list[dict[str, Any]]]:
    """``admin_update_topic_control_info`` (max message size) and/or ``admin_modify_topic_info``
    (partitions, publish / subscribe flags) on the brokers given or every broker the topic is on."""
    topics = _csv(names)
    deploy = {"numPartitions": partitions, "acceptPublish": accept_publish, "acceptSubscribe": accept_subscribe}
    if max_msg_size_mb is None and all(v is None for v in deploy.values()):
        raise ConfigError("update_topic", "nothing to change: give max_msg_size_mb, partitions, accept_publish "
                          "or accept_subscribe")
    rows: list[dict[str, Any]] = []
    if max_msg_size_mb is not None:
        rows += yield from modify_records("admin_update_topic_control_info", topicName=topics,
                                          maxMsgSizeInMB=max_msg_size_mb, modifyUser=ctx.user)
    if any(v is not None for v in deploy.values()):
        ids = _csv([str(b) for b in broker_ids] if broker_ids is not None and not isinstance(broker_ids, str)
                   else broker_ids)
        if ids is None:
            found: set[int] = set()
            for t in (yield from list_topics(topics)):
                found.update(t.broker_ids)
            ids = ",".join(str(b) for b in sorted(found)) or None
            if ids is None:
                raise AdminError(404, f"topic(s) {topics} not found", "admin_query_topic_info")
        rows += yield from modify_records("admin_modify_topic_info", topicName=topics, brokerId=ids,
                                          modifyUser=ctx.user, modifyDate=_stamp(), **deploy)
    return rows


def delete_topic(ctx: Ctx, name: str, *, broker_ids: str | None, purge: bool) -> Op[None]:
    stamp = _stamp()
    params = {"topicName": name, "brokerId": broker_ids or "1", "modifyUser": ctx.user, "modifyDate": stamp}
    yield Request("op_modify", "admin_delete_topic_info", params)
    if purge:
        yield Request("op_modify", "admin_remove_topic_info", params)


def modify_records(method: str, **params: Any) -> Op[list[dict[str, Any]]]:
    """A modify call whose ``data`` lists one result per record: any ``success: false`` raises."""
    rows = _rows((yield Request("op_modify", method, params)))
    for row in rows:
        if row.get("success") is False:
            what = row.get("topicName") or f"broker {row.get('brokerId')}"
            raise AdminError(_int(row.get("errCode")), f"{what}: {row.get('errInfo') or 'failed'}", method)
    return rows


# ---- brokers (master: WebBrokerConfHandler)


def brokers(broker_ids: str | Iterable[int] | None = None) -> Op[list[BrokerStatus]]:
    ids = _csv([str(b) for b in broker_ids] if broker_ids is not None and not isinstance(broker_ids, str) else broker_ids)
    answer = yield Request("op_query", "admin_query_broker_run_status", {"brokerId": ids})
    return [BrokerStatus.from_json(d) for d in _rows(answer)]


def _broker_targets(ctx: Ctx, only: Iterable[int] | None = None) -> Op[list[tuple[int, str]]]:
    """(broker id, web URL) of every online broker (or of ``only``)."""
    wanted = set(only) if only is not None else None
    found: list[tuple[int, str]] = []
    for b in (yield from brokers()):
        if wanted is not None and b.broker_id not in wanted:
            continue
        if wanted is None and b.online is False:
            continue
        url = ctx.broker_urls.get(b.broker_id) or b.web_url
        if url is None:
            if wanted is None and b.online is None:
                continue  # a draft record: not in service
            raise AdminError(-1, f"broker {b.broker_id} has no web port: pass broker_urls={{{b.broker_id}: URL}}",
                             "admin_query_broker_run_status")
        found.append((b.broker_id, url))
    missing = sorted(wanted - {bid for bid, _ in found}) if wanted is not None else []
    if missing:
        raise AdminError(404, f"broker(s) {', '.join(map(str, missing))} not known to the master",
                         "admin_query_broker_run_status")
    return found


def _broker_call(bid: int, url: str, op_type: str, method: str, **params: Any) -> Request:
    # brokerId: ignored by a real broker, selects the broker on an embedded server with several
    return Request(op_type, method, {**params, "brokerId": bid}, url)


# ---- groups (master: WebOtherInfoHandler; brokers: BrokerAdminServlet)


def group_detail(group: str) -> Op[GroupDetail]:
    answer = yield Request("op_query", "admin_query_consume_group_detail", {"consumeGroup": group})
    return GroupDetail.from_json(answer)


def list_groups(ctx: Ctx) -> Op[list[str]]:
    """Groups with offsets on any broker (``admin_get_booked_groupname`` of each)."""
    out: set[str] = set()
    for bid, url in (yield from _broker_targets(ctx)):
        answer = yield _broker_call(bid, url, "op_query", "admin_get_booked_groupname")
        for item in _rows(answer, "dataSet"):
            out.update(str(g) for g in item.get("groupName") or [])
    return sorted(out)


def group_offsets(ctx: Ctx, group: str, topics: str | Iterable[str] | None = None) -> Op[list[PartitionOffset]]:
    """``admin_query_offset`` on every broker: the group's position and lag per partition."""
    out: list[PartitionOffset] = []
    for bid, url in (yield from _broker_targets(ctx)):
        answer = yield _broker_call(bid, url, "op_query", "admin_query_offset", groupName=group, topicName=_csv(topics))
        for g in _rows(answer, "dataSet"):
            name = str(g.get("groupName") or group)
            for sub in g.get("subInfo") or []:
                if not isinstance(sub, dict):
                    continue
                topic = str(sub.get("topicName") or "")
                out.extend(PartitionOffset.from_json(name, topic, bid, o) for o in sub.get("offsets") or []
                           if isinstance(o, dict))
    out.sort(key=lambda p: (p.topic, p.broker_id, p.partition_id))
    return out


def partition_offset(
    ctx: Ctx, group: str, topic: str, broker_id: int, partition_id: int, *, real_offset: bool = False,
) -> Op[PartitionOffsetDetail]:
    ((bid, url),) = yield from _broker_targets(ctx, [broker_id])
    answer = yield _broker_call(bid, url, "op_query", "admin_query_group_offset", groupName=group, topicName=topic,
                                partitionId=partition_id, requireRealOffset=real_offset)
    return PartitionOffsetDetail.from_json(answer)


def set_offset(ctx: Ctx, group: str, topic: str, broker_id: int, partition_id: int, offset: int) -> Op[int]:
    """``admin_manual_set_current_offset``: one partition; returns the offset it had."""
    ((bid, url),) = yield from _broker_targets(ctx, [broker_id])
    answer = yield _broker_call(bid, url, "op_modify", "admin_manual_set_current_offset", groupName=group,
                                topicName=topic, partitionId=partition_id, manualOffset=offset, modifyUser=ctx.user)
    return _int(answer.get("oldOffset"))


def _split_keys(offsets: Mapping[str, int]) -> dict[int, dict[str, int]]:
    per_broker: dict[int, dict[str, int]] = {}
    for key, value in offsets.items():
        parts = key.split(":")
        if len(parts) != 3 or not parts[0].strip().lstrip("-").isdigit() or not parts[2].strip().isdigit():
            raise ConfigError("offsets", f"key {key!r} must be brokerId:topicName:partitionId")
        per_broker.setdefault(int(parts[0]), {})[key] = int(value)
    return per_broker


def set_offsets(ctx: Ctx, groups: str | Iterable[str], offsets: Mapping[str, int]) -> Op[None]:
    """``admin_set_offset`` (manualSet): ``{"brokerId:topic:partitionId": offset}``, clamped by the brokers."""
    per_broker = _split_keys(offsets)
    if not per_broker:
        raise ConfigError("offsets", "no partition offsets to set")
    for bid, url in (yield from _broker_targets(ctx, per_broker)):
        yield _broker_call(bid, url, "op_modify", "admin_set_offset", groupName=_csv(groups), manualSet=True,
                           offsetJsonInfo=json.dumps(per_broker[bid]), modifyUser=ctx.user)


def topic_partitions(topic: str) -> Op[list[tuple[int, int]]]:
    """(broker id, partition id) of every partition of ``topic``."""
    info = yield from describe_topic(topic)
    return [(d.broker_id, pid) for d in info.deployments for pid in d.partition_ids]


def reset_offsets(ctx: Ctx, group: str, topic: str, to: str | int) -> Op[list[PartitionOffset]]:
    """Every partition of ``topic`` to ``"earliest"``, ``"latest"`` or an index offset (clamped)."""
    if to == "earliest":
        value = 0
    elif to == "latest":
        value = _LATEST
    elif isinstance(to, int) and not isinstance(to, bool) and to >= 0:
        value = to
    else:
        raise ConfigError("to", f"expected 'earliest', 'latest' or an offset >= 0, got {to!r}")
    parts = yield from topic_partitions(topic)
    yield from set_offsets(ctx, group, {f"{b}:{topic}:{p}": value for b, p in parts})
    return (yield from group_offsets(ctx, group, topic))


def offsets_for_times(
    ctx: Ctx, topic: str, when: _dt.datetime | int | float, partitions: Iterable[tuple[int, int]] | None = None,
) -> Op[list[TimeOffset]]:
    """First offset at or after ``when`` per partition, looked up over the brokers' append times."""
    ts = timestamp_ms(when)
    wanted = set(partitions) if partitions is not None else None
    info = yield from describe_topic(topic)
    out: list[TimeOffset] = []
    for bid, url in (yield from _broker_targets(ctx, info.broker_ids)):
        try:
            answer = yield _broker_call(bid, url, "op_query", TIME_LOOKUP_METHOD, topicName=topic, timestamp=ts)
        except AdminError as exc:
            if "Unsupported method" in exc.message:
                raise AdminError(exc.code, f"broker {bid} has no time lookup ({TIME_LOOKUP_METHOD} is the embedded "
                                 "server's; a real TubeMQ broker only resets a group to its own offset history: "
                                 "set_offsets_by_time)", TIME_LOOKUP_METHOD) from None
            raise
        for row in _rows(answer):
            pid = _int(row.get("partitionId"))
            if wanted is None or (bid, pid) in wanted:
                out.append(TimeOffset(topic, bid, pid, ts, _int(row.get("offset"))))
    out.sort(key=lambda t: (t.broker_id, t.partition_id))
    return out


def reset_offsets_to_time(ctx: Ctx, group: str, topic: str, when: _dt.datetime | int | float) -> Op[list[PartitionOffset]]:
    """Kafka's ``--reset-offsets --to-datetime``: each partition to its first message at or after ``when``."""
    found = yield from offsets_for_times(ctx, topic, when)
    if not found:
        raise AdminError(404, f"topic {topic} has no partitions on a reachable broker", TIME_LOOKUP_METHOD)
    yield from set_offsets(ctx, group, {t.key: t.offset for t in found})
    return (yield from group_offsets(ctx, group, topic))


def set_offsets_by_time(
    ctx: Ctx, group: str, when: _dt.datetime | int | float | str, topics: str | Iterable[str] | None = None,
) -> Op[list[dict[str, Any]]]:
    """``admin_set_offset_by_time`` on every broker: the group back to the offsets IT had committed at
    ``when`` (the real broker's offset history), not to the messages appended then; raw before/after."""
    out: list[dict[str, Any]] = []
    for bid, url in (yield from _broker_targets(ctx)):
        answer = yield _broker_call(bid, url, "op_modify", "admin_set_offset_by_time", groupName=group,
                                    recordTime=record_time(when), topicName=_csv(topics), modifyUser=ctx.user)
        out.extend({"brokerId": bid, **row} for row in _rows(answer))
    return out


def clone_offsets(
    ctx: Ctx, source: str, targets: str | Iterable[str], topics: str | Iterable[str] | None = None,
) -> Op[int]:
    """``admin_clone_offset`` on every broker the source group has offsets on; returns how many brokers."""
    done = 0
    missing: list[str] = []
    for bid, url in (yield from _broker_targets(ctx)):
        try:
            yield _broker_call(bid, url, "op_modify", "admin_clone_offset", sourceGroupName=source,
                               targetGroupName=_csv(targets), topicName=_csv(topics), modifyUser=ctx.user)
            done += 1
        except AdminError as exc:
            if "has not been registered" not in exc.message and "query result is null" not in exc.message:
                raise
            missing.append(f"{bid} ({exc.message})")
    if not done:
        raise AdminError(400, f"group {source} has no offsets on broker(s) {', '.join(missing) or '-'}",
                         "admin_clone_offset")
    return done
