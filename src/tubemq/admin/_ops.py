"""Every admin operation once, as a generator that yields :class:`Request` s and receives answers.

Why generators: the sync and the asyncio client drive the same code (one ``send`` per yielded request,
a blocking or an awaited call in between), so the two can never disagree on parameters or parsing.
Master calls go to the master's ``webapi.htm``; group-offset calls go to every online broker's web API
(``BrokerAdminServlet``), whose address the master's ``admin_query_broker_run_status`` gives.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import logging
import time
from collections.abc import Generator, Iterable, Mapping
from typing import Any, TypeVar

from tubemq.errors import (
    AdminError,
    AdminRecordError,
    ConfigError,
    NoTimeLookupError,
    TubeMQConnectionError,
    TubeMQTimeoutError,
)

from ..protocol.constants import INDEX_ENTRY_SIZE
from ._http import Request
from .types import (
    BrokerResults,
    BrokerStatus,
    GroupDetail,
    PartitionOffset,
    PartitionOffsetDetail,
    TimeOffset,
    TopicInfo,
    _int,
)

T = TypeVar("T")
log = logging.getLogger("tubemq.admin")
#: A broker whose web API cannot be reached: skipped by the calls that visit every broker.
UNREACHABLE = (TubeMQConnectionError, TubeMQTimeoutError)
Op = Generator[Request, dict[str, Any], T]

#: The embedded server's time lookup (no real TubeMQ broker serves it: see offsets_for_times).
TIME_LOOKUP_METHOD = "admin_query_offset_by_time"
#: A record answer "already has these values" (a real master's row code for an unchanged record).
ERR_UNCHANGED = 403
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
) -> Op[list[dict[str, Any]]]:
    """``admin_add_new_topic_record``: one row per broker; any failed row raises ``AdminRecordError``
    (402: the topic already exists there; the rows that succeeded are in ``.applied``)."""
    return (yield from modify_records(
        "admin_add_new_topic_record", topicName=name, brokerId=_ids(broker_ids) or "1", numPartitions=partitions,
        numTopicStores=stores, maxMsgSizeInMB=max_msg_size_mb, acceptPublish=accept_publish,
        acceptSubscribe=accept_subscribe, createUser=ctx.user, createDate=_stamp(),
    ))


def _ids(broker_ids: str | Iterable[int] | None) -> str | None:
    if broker_ids is None or isinstance(broker_ids, str):
        return _csv(broker_ids)
    return _csv([str(b) for b in broker_ids])


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
        rows += yield from modify_records("admin_update_topic_control_info", unchanged_ok=True, topicName=topics,
                                          maxMsgSizeInMB=max_msg_size_mb, modifyUser=ctx.user)
    if any(v is not None for v in deploy.values()):
        ids = _ids(broker_ids)
        if ids is None:
            found: set[int] = set()
            for t in (yield from list_topics(topics)):
                found.update(t.broker_ids)
            ids = ",".join(str(b) for b in sorted(found)) or None
            if ids is None:
                raise AdminError(404, f"topic(s) {topics} not found", "admin_query_topic_info")
        rows += yield from modify_records("admin_modify_topic_info", unchanged_ok=True, topicName=topics, brokerId=ids,
                                          modifyUser=ctx.user, modifyDate=_stamp(), **deploy)
    return rows


def delete_topic(
    ctx: Ctx, name: str, *, broker_ids: str | Iterable[int] | None, purge: bool, stop_first: bool = False,
) -> Op[list[dict[str, Any]]]:
    """``admin_delete_topic_info`` on the given brokers, default every broker the topic is on.

    A real master refuses (406) while the topic still accepts publish or subscribe: ``stop_first``
    turns both off first (``admin_modify_topic_info``) where they are on. ``purge`` then removes the
    soft-deleted records (``admin_remove_topic_info``). Any failed record raises ``AdminRecordError``."""
    ids = _ids(broker_ids)
    if ids is None or stop_first:
        info = yield from describe_topic(name)
        wanted = {int(b) for b in ids.split(",")} if ids is not None else None
        deps = [d for d in info.deployments if wanted is None or d.broker_id in wanted]
        if ids is None:
            ids = ",".join(str(d.broker_id) for d in deps)
        live = ",".join(str(d.broker_id) for d in deps if d.accept_publish is not False or d.accept_subscribe is not False)
        if stop_first and live:
            yield from modify_records("admin_modify_topic_info", topicName=name, brokerId=live,
                                      acceptPublish=False, acceptSubscribe=False, modifyUser=ctx.user,
                                      modifyDate=_stamp())
    params: dict[str, Any] = {"topicName": name, "brokerId": ids, "modifyUser": ctx.user, "modifyDate": _stamp()}
    rows = yield from modify_records("admin_delete_topic_info", **params)
    if purge:
        rows = yield from modify_records("admin_remove_topic_info", **params)
    return rows


def modify_records(method: str, *, unchanged_ok: bool = False, **params: Any) -> Op[list[dict[str, Any]]]:
    """A modify call whose ``data`` lists one result per record: any ``success: false`` raises
    :class:`~tubemq.errors.AdminRecordError` naming every failed record (a real master answers such
    calls ``result: true`` even when every record failed). ``unchanged_ok``: a 403 row (the record
    already had the values asked for) is not a failure."""
    rows = _rows((yield Request("op_modify", method, params)))
    failed = [r for r in rows if r.get("success") is False and not (unchanged_ok and r.get("errCode") == ERR_UNCHANGED)]
    if failed:
        raise AdminRecordError(method, failed, [r for r in rows if r.get("success") is not False])
    return rows


# ---- brokers (master: WebBrokerConfHandler)


def brokers(broker_ids: str | Iterable[int] | None = None) -> Op[list[BrokerStatus]]:
    answer = yield Request("op_query", "admin_query_broker_run_status", {"brokerId": _ids(broker_ids)})
    return [BrokerStatus.from_json(d) for d in _rows(answer)]


def broker_records(ctx: Ctx, method: str, broker_ids: str | Iterable[int], **extra: Any) -> Op[list[dict[str, Any]]]:
    """A broker configure change (online / offline / reload / delete) of the brokers named."""
    ids = _ids(broker_ids)
    if ids is None:
        raise ConfigError("broker_ids", "name at least one broker id")
    return (yield from modify_records(method, brokerId=ids, modifyUser=ctx.user, **extra))


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


def _skip(out: BrokerResults[Any], bid: int, method: str, exc: Exception) -> None:
    """Note a broker whose web API did not answer: the call goes on with the others."""
    out.unreachable[bid] = str(exc)
    log.warning("%s: broker %d skipped, its web API did not answer (%s); nothing was read or changed there",
                method, bid, exc)


def _merge(out: BrokerResults[Any], other: BrokerResults[Any]) -> None:
    out.unreachable.update(other.unreachable)


# ---- groups (master: WebOtherInfoHandler; brokers: BrokerAdminServlet)


def group_detail(group: str) -> Op[GroupDetail]:
    answer = yield Request("op_query", "admin_query_consume_group_detail", {"consumeGroup": group})
    detail = GroupDetail.from_json(answer)
    if not detail.members and not detail.topics:
        # a real master answers an unknown group with an empty success: say it instead
        raise AdminError(404, f"group {group} is not known to the master (no member is consuming now; offsets "
                         "it committed stay on the brokers: group_offsets)", "admin_query_consume_group_detail")
    return detail


def list_groups(ctx: Ctx) -> Op[BrokerResults[str]]:
    """Groups with offsets on any broker (``admin_get_booked_groupname`` of each; one that does not
    answer is skipped and named in ``.unreachable``)."""
    found: set[str] = set()
    out: BrokerResults[str] = BrokerResults()
    for bid, url in (yield from _broker_targets(ctx)):
        try:
            answer = yield _broker_call(bid, url, "op_query", "admin_get_booked_groupname")
        except UNREACHABLE as exc:
            _skip(out, bid, "admin_get_booked_groupname", exc)
            continue
        for item in _rows(answer, "dataSet"):
            found.update(str(g) for g in item.get("groupName") or [])
    out.extend(sorted(found))
    return out


def group_offsets(ctx: Ctx, group: str, topics: str | Iterable[str] | None = None) -> Op[BrokerResults[PartitionOffset]]:
    """``admin_query_offset`` on every broker: the group's position and lag per partition."""
    out: BrokerResults[PartitionOffset] = BrokerResults()
    for bid, url in (yield from _broker_targets(ctx)):
        try:
            answer = yield _broker_call(bid, url, "op_query", "admin_query_offset", groupName=group,
                                        topicName=_csv(topics))
        except UNREACHABLE as exc:
            _skip(out, bid, "admin_query_offset", exc)
            continue
        for g in _rows(answer, "dataSet"):
            name = str(g.get("groupName") or group)
            for sub in g.get("subInfo") or []:
                if not isinstance(sub, dict):
                    continue
                topic = str(sub.get("topicName") or "")
                out.extend(PartitionOffset.from_json(name, topic, bid, o) for o in sub.get("offsets") or []
                           if isinstance(o, dict))
    out.sort(key=lambda p: (p.topic, p.broker_id, p.partition_id))
    alone = yield from _alone_in_store(sorted({p.topic for p in out}))
    out[:] = [dataclasses.replace(p, lag_messages=p.lag // INDEX_ENTRY_SIZE)
              if (p.topic, p.broker_id) in alone and p.lag >= 0 else p for p in out]
    return out


def _alone_in_store(topics: list[str]) -> Op[set[tuple[str, int]]]:
    """(topic, broker id) of the deployments whose every store holds one partition: there the index
    holds nothing but the partition's own entries, so index bytes / 28 is a message count."""
    if not topics:
        return set()
    try:
        infos = yield from list_topics(topics)
    except AdminError:
        return set()  # lag in messages unknown; the index lag stays
    return {(t.name, d.broker_id) for t in infos for d in t.deployments if d.num_partitions == 1}


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


def set_offsets(ctx: Ctx, groups: str | Iterable[str], offsets: Mapping[str, int]) -> Op[BrokerResults[int]]:
    """``admin_set_offset`` (manualSet): ``{"brokerId:topic:partitionId": offset}``, clamped by the
    brokers; returns the ids of the brokers set (one that does not answer: in ``.unreachable``)."""
    per_broker = _split_keys(offsets)
    if not per_broker:
        raise ConfigError("offsets", "no partition offsets to set")
    out: BrokerResults[int] = BrokerResults()
    for bid, url in (yield from _broker_targets(ctx, per_broker)):
        try:
            yield _broker_call(bid, url, "op_modify", "admin_set_offset", groupName=_csv(groups), manualSet=True,
                               offsetJsonInfo=json.dumps(per_broker[bid]), modifyUser=ctx.user)
        except UNREACHABLE as exc:
            _skip(out, bid, "admin_set_offset", exc)
            continue
        out.append(bid)
    return out


def topic_partitions(topic: str) -> Op[list[tuple[int, int]]]:
    """(broker id, partition id) of every partition of ``topic``."""
    info = yield from describe_topic(topic)
    return [(d.broker_id, pid) for d in info.deployments for pid in d.partition_ids]


def reset_offsets(ctx: Ctx, group: str, topic: str, to: str | int) -> Op[BrokerResults[PartitionOffset]]:
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
    done = yield from set_offsets(ctx, group, {f"{b}:{topic}:{p}": value for b, p in parts})
    out = yield from group_offsets(ctx, group, topic)
    _merge(out, done)
    return out


def offsets_for_times(
    ctx: Ctx, topic: str, when: _dt.datetime | int | float, partitions: Iterable[tuple[int, int]] | None = None,
) -> Op[list[TimeOffset]]:
    """First offset at or after ``when`` per partition, looked up over the brokers' append times.
    A broker without the lookup (every real one) raises :class:`~tubemq.errors.NoTimeLookupError`."""
    ts = timestamp_ms(when)
    wanted = set(partitions) if partitions is not None else None
    info = yield from describe_topic(topic)
    out: list[TimeOffset] = []
    for bid, url in (yield from _broker_targets(ctx, info.broker_ids)):
        try:
            answer = yield _broker_call(bid, url, "op_query", TIME_LOOKUP_METHOD, topicName=topic, timestamp=ts)
        except AdminError as exc:
            if "Unsupported method" in exc.message:
                raise NoTimeLookupError(
                    exc.code, f"broker {bid} has no time lookup ({TIME_LOOKUP_METHOD} is the embedded server's). "
                    "On a real TubeMQ broker: BoundConsumer.offset_for_time searches the messages' msgTime "
                    "(producers must set msg_time; one minute precision), and set_offsets_by_time puts a group "
                    "back to its own offset history", TIME_LOOKUP_METHOD) from None
            raise
        for row in _rows(answer):
            pid = _int(row.get("partitionId"))
            if wanted is None or (bid, pid) in wanted:
                out.append(TimeOffset(topic, bid, pid, ts, _int(row.get("offset"))))
    out.sort(key=lambda t: (t.broker_id, t.partition_id))
    return out


def reset_offsets_to_time(
    ctx: Ctx, group: str, topic: str, when: _dt.datetime | int | float,
) -> Op[BrokerResults[PartitionOffset]]:
    """Kafka's ``--reset-offsets --to-datetime``: each partition to its first message at or after ``when``."""
    found = yield from offsets_for_times(ctx, topic, when)
    if not found:
        raise AdminError(404, f"topic {topic} has no partitions on a reachable broker", TIME_LOOKUP_METHOD)
    done = yield from set_offsets(ctx, group, {t.key: t.offset for t in found})
    out = yield from group_offsets(ctx, group, topic)
    _merge(out, done)
    return out


#: Where a history record is looked for after ``when`` (the brokers record each group every few seconds
#: while it commits; the real ``admin_set_offset_by_time`` also looks 5 minutes ahead).
HISTORY_WINDOW_MS = 5 * 60 * 1000


def _history_offsets(bid: int, answer: dict[str, Any], group: str, topics: set[str] | None,
                     until_ms: int) -> tuple[dict[str, int], int | None]:
    """``{"bid:topic:partitionId": committed offset}`` of the group's first history record in the
    answer (v3 records: ``records[].offsets[].parts[].iCfm``), and the record's time."""
    for item in _rows(answer):
        if item.get("groupName") != group or item.get("result") is not True:
            continue
        for rec in item.get("records") or []:
            if not isinstance(rec, dict):
                continue
            dt = _int(rec.get("dt"))
            if dt > until_ms:
                return {}, None
            out: dict[str, int] = {}
            for topic_rec in rec.get("records") or []:
                name = str(topic_rec.get("topic") or "") if isinstance(topic_rec, dict) else ""
                if not name or (topics is not None and name not in topics):
                    continue
                for store in topic_rec.get("offsets") or []:
                    for part in (store.get("parts") or []) if isinstance(store, dict) else []:
                        pid, cfm = part.get("partId"), part.get("iCfm")
                        if isinstance(pid, int) and isinstance(cfm, int) and cfm >= 0:
                            out[f"{bid}:{name}:{pid}"] = cfm
            return out, dt
    return {}, None


def set_offsets_by_time(
    ctx: Ctx, group: str, when: _dt.datetime | int | float | str, topics: str | Iterable[str] | None = None,
) -> Op[BrokerResults[dict[str, Any]]]:
    """The group back to the offsets IT had committed at ``when`` (the brokers' offset history), not to
    the messages appended then. Per broker: its first history record of the group at or after
    ``when`` (within 5 minutes; ``admin_get_group_history_offset``), then those offsets set with
    ``admin_set_offset``. Both calls work on TubeMQ 2.5, whose own ``admin_set_offset_by_time``
    always fails (it looks for the history under the wrong key). One row per partition set:
    ``brokerId``, ``topicName``, ``partitionId``, ``offset``, ``recordTime`` (the record's epoch ms)."""
    stamp = record_time(when)
    start_ms = int(_dt.datetime.strptime(stamp, "%Y%m%d%H%M%S").timestamp() * 1000)
    names = _csv(topics)
    wanted = set(names.split(",")) if names else None
    out: BrokerResults[dict[str, Any]] = BrokerResults()
    missing: list[int] = []
    for bid, url in (yield from _broker_targets(ctx)):
        try:
            answer = yield _broker_call(bid, url, "op_query", "admin_get_group_history_offset", groupName=group,
                                        recordTime=stamp, msgCount=1)
            offsets, dt = _history_offsets(bid, answer, group, wanted, start_ms + HISTORY_WINDOW_MS)
            if not offsets:
                missing.append(bid)
                continue
            yield _broker_call(bid, url, "op_modify", "admin_set_offset", groupName=group, manualSet=True,
                               offsetJsonInfo=json.dumps(offsets), modifyUser=ctx.user)
        except UNREACHABLE as exc:
            _skip(out, bid, "admin_get_group_history_offset", exc)
            continue
        for key, offset in offsets.items():
            _b, name, pid = key.split(":")
            out.append({"brokerId": bid, "topicName": name, "partitionId": int(pid), "offset": offset,
                        "recordTime": dt})
    if not out and not out.unreachable:
        raise AdminError(400, f"group {group} has no offset history at or after {stamp} (within 5 minutes) on "
                         f"broker(s) {', '.join(map(str, missing)) or '-'}: the brokers record a group's offsets "
                         "only while it consumes", "admin_get_group_history_offset")
    return out


def clone_offsets(
    ctx: Ctx, source: str, targets: str | Iterable[str], topics: str | Iterable[str] | None = None,
) -> Op[int]:
    """``admin_clone_offset`` on every broker the source group has offsets on; returns how many brokers."""
    done = 0
    missing: list[str] = []
    skipped: BrokerResults[int] = BrokerResults()
    for bid, url in (yield from _broker_targets(ctx)):
        try:
            yield _broker_call(bid, url, "op_modify", "admin_clone_offset", sourceGroupName=source,
                               targetGroupName=_csv(targets), topicName=_csv(topics), modifyUser=ctx.user)
            done += 1
        except UNREACHABLE as exc:
            _skip(skipped, bid, "admin_clone_offset", exc)
            missing.append(f"{bid} (unreachable)")
        except AdminError as exc:
            if "has not been registered" not in exc.message and "query result is null" not in exc.message:
                raise
            missing.append(f"{bid} ({exc.message})")
    if not done:
        raise AdminError(400, f"group {source} has no offsets on broker(s) {', '.join(missing) or '-'}",
                         "admin_clone_offset")
    return done
