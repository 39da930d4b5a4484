"""The group-offset calls of the real broker's web API (``BrokerAdminServlet``) on the embedded server.

A real broker serves them on its own web port (8081); the embedded server answers them on its admin
API for the brokers of its process, reporting that port as their ``brokerWebPort``; ``brokerId``
picks the broker when the process runs several (a real broker ignores the parameter). Answers follow
the servlet's JSON (``dataSet``/``subInfo``/``offsets`` of ``GroupOffsetInfo``; recorded samples in
``tests/data/admin/``). Modify calls are ``op_modify`` here, so they need the admin token when one is set.

``admin_query_offset_by_time`` is this server's own call (no real broker has it): the first index
offset appended at or after a time, per partition, over the store's append times. With
``ServerConfig.time_lookup`` False it is not served, and the answer is a real broker's to an unknown method.
``admin_set_offset_by_time`` is the real one: the group back to its own offsets recorded at a time
(:mod:`tubemq.server.admin.offset_history`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .offset_history import OffsetHistory, ServedBroker
from .params import ERR_BAD_REQUEST, Handler, _AdminError, _bool_param, _int_param, _param, strict_int

if TYPE_CHECKING:
    from ..broker import Broker
    from ..meta import TopicConf
    from ..storage import MessageStore

#: TBaseConstants.META_VALUE_UNDEFINED: what the real servlet answers for a value it does not have.
UNDEFINED = -2
MAX_OFFSET_KEYS = 100_000


def _names(params: dict[str, str], name: str, *, required: bool) -> list[str]:
    text = _param(params, name, required=required)
    return [t.strip() for t in text.split(",") if t.strip()] if text else []


def _fail(message: str) -> _AdminError:
    return _AdminError(ERR_BAD_REQUEST, message)


class BrokerWebApi:
    """The embedded brokers' offset calls, registered into ``AdminApi.extra_methods``."""

    def __init__(self, nodes: Callable[[], Sequence[ServedBroker]], *, time_lookup: bool = True) -> None:
        self._nodes = nodes
        #: False: no ``admin_query_offset_by_time``, so it gets a real broker's "Unsupported method" answer
        self._time_lookup = time_lookup
        #: broker id -> its offset history (recorded by offset_history.run, read by set_offset_by_time)
        self.histories: dict[int, OffsetHistory] = {}

    def methods(self) -> dict[tuple[str, str], Handler]:
        methods: dict[tuple[str, str], Handler] = {
            ("op_query", "admin_query_group_offset"): self._query_group_offset,
            ("op_query", "admin_query_offset"): self._query_offset,
            ("op_query", "admin_get_booked_groupname"): self._booked_groups,
            ("op_query", "admin_query_offset_by_time"): self._offset_by_time,
            ("op_modify", "admin_manual_set_current_offset"): self._manual_set,
            ("op_modify", "admin_set_offset"): self._set_offset,
            ("op_modify", "admin_clone_offset"): self._clone_offset,
            ("op_modify", "admin_set_offset_by_time"): self._set_offset_by_time,
            ("op_query", "admin_get_group_history_offset"): self._group_history,
        }
        if not self._time_lookup:
            del methods[("op_query", "admin_query_offset_by_time")]
        return methods

    def web_port_of(self, port: Callable[[], int]) -> Callable[[int], int]:
        """``AdminApi.broker_web_port``: this API's port for the brokers of this process, else 0."""
        return lambda bid: port() if any(n.broker_id == bid for n in self._nodes()) else 0

    # ---- helpers

    def _broker(self, params: dict[str, str]) -> Broker:
        nodes = list(self._nodes())
        text = _param(params, "brokerId")
        if text is None:
            if len(nodes) == 1:
                return nodes[0].broker
            raise _fail(f"Parameter brokerId is required: this server runs {len(nodes)} brokers")
        try:
            bid = strict_int(text)
        except ValueError:
            raise _fail(f"Parameter brokerId must be an integer, got {text!r}") from None
        for n in nodes:
            if n.broker_id == bid:
                return n.broker
        raise _fail(f"Broker {bid} is not served by this process")

    @staticmethod
    def _partitions(broker: Broker, topic: TopicConf) -> list[int]:
        return [s * 10000 + p for s in range(topic.num_stores) for p in range(topic.num_partitions)]

    @staticmethod
    def _store(broker: Broker, topic_name: str, pid: int) -> tuple[TopicConf, MessageStore]:
        topic = broker.catalog.topic(topic_name)
        if topic is None:
            raise _fail("Invalid parameter: not found the topicName configure!")
        store = broker.catalog.store_for(topic, pid)
        if store is None:
            raise _fail("Invalid parameter: not found the store by topicName!")
        return topic, store

    @staticmethod
    def _committed(broker: Broker, group: str, topic: str, pid: int, store: MessageStore) -> int:
        o = broker.offsets.get(group, topic, pid)
        return store.min_offset if o is None else o

    @staticmethod
    def _reset(broker: Broker, group: str, topic: str, pid: int, offset: int, store: MessageStore) -> int:
        """OffsetService.resetOffset: the new committed offset, in-flight reads forgotten; returns the old."""
        old = BrokerWebApi._committed(broker, group, topic, pid, store)
        broker.offsets.set(group, topic, pid, offset)
        broker.registrations.clear_inflight((group, topic, pid))
        return old

    @staticmethod
    def _group_topics(broker: Broker, group: str) -> set[str]:
        """getGroupSubInfo: the topics the group has offsets or registrations for on this broker."""
        topics = {t for (t, _p) in broker.offsets.partitions(group)}
        topics.update(t for t, _p in broker.registrations.partitions(group))
        return topics

    @staticmethod
    def _booked(broker: Broker) -> set[str]:
        return set(broker.views.groups())

    def _offset_info(self, broker: Broker, group: str, topic: TopicConf, pid: int) -> dict[str, Any]:
        store = broker.catalog.store_for(topic, pid)
        if store is None:
            return {"partitionId": pid, "curOffset": UNDEFINED, "flightOffset": UNDEFINED,
                    "curDataOffset": UNDEFINED, "offsetLag": UNDEFINED, "dataLag": UNDEFINED,
                    "offsetMax": UNDEFINED, "dataMax": UNDEFINED}
        cur = self._committed(broker, group, topic.name, pid, store)
        flight = cur + broker.registrations.inflight((group, topic.name, pid))
        return {
            "partitionId": pid, "curOffset": cur, "flightOffset": flight, "curDataOffset": UNDEFINED,
            "offsetLag": store.max_offset - cur, "dataLag": UNDEFINED, "offsetMax": store.max_offset,
            "dataMax": store.data_max,
        }

    def _group_offsets(self, broker: Broker, group: str, topics: list[str]) -> list[dict[str, Any]]:
        subscribed = self._group_topics(broker, group)
        wanted = sorted(subscribed if not topics else subscribed & set(topics))
        out = []
        for name in wanted:
            topic = broker.catalog.topic(name)
            if topic is None:
                continue
            offsets = [self._offset_info(broker, group, topic, pid) for pid in self._partitions(broker, topic)]
            out.append({"topicName": name, "offsets": offsets, "partCount": len(offsets)})
        return out

    # ---- calls

    def _query_group_offset(self, params: dict[str, str]) -> dict[str, Any]:
        broker = self._broker(params)
        topic_name = _param(params, "topicName", required=True) or ""
        group = _param(params, "groupName", required=True) or ""
        pid = _int_param(params, "partitionId", -1, 0, 2**31 - 1)
        if pid < 0:
            raise _fail("Parameter partitionId is required and must not be blank!")
        real = _bool_param(params, "requireRealOffset", False)
        _topic, store = self._store(broker, topic_name, pid)
        cur = self._committed(broker, group, topic_name, pid, store)
        out: dict[str, Any] = {
            "result": True, "errCode": 0, "errMsg": "OK!",
            "tmpOffset": cur + broker.registrations.inflight((group, topic_name, pid)),
            "minOffset": store.min_offset, "maxOffset": store.max_offset,
            "minDataOffset": store.segments[0].dat_base, "maxDataOffset": store.data_max,
        }
        if real:
            out.update(zkOffset=cur, curReadDataOffset=-1, curRdDltDataOffset=-1)
        return out

    def _query_offset(self, params: dict[str, str]) -> dict[str, Any]:
        broker = self._broker(params)
        groups = _names(params, "groupName", required=False)
        topics = _names(params, "topicName", required=False)
        booked = self._booked(broker)
        chosen = sorted(booked if not groups else booked & set(groups))
        data = []
        for group in chosen:
            sub = self._group_offsets(broker, group, topics)
            data.append({"groupName": group, "subInfo": sub, "topicCount": len(sub)})
        return {"result": True, "errCode": 0, "errMsg": "Success!", "dataSet": data, "totalCnt": len(data)}

    def _booked_groups(self, params: dict[str, str]) -> dict[str, Any]:
        broker = self._broker(params)
        if _bool_param(params, "withDivide", False):
            online = sorted(broker.registrations.groups())
            offline = sorted(self._booked(broker) - set(online))
            data = [{"type": "online", "groupName": online, "groupCount": len(online)},
                    {"type": "offline", "groupName": offline, "groupCount": len(offline)}]
        else:
            groups = sorted(self._booked(broker))
            data = [{"type": "all", "groupName": groups, "groupCount": len(groups)}]
        return {"result": True, "errCode": 0, "errMsg": "Success!", "dataSet": data, "dataCount": len(data)}

    def _offset_by_time(self, params: dict[str, str]) -> dict[str, Any]:
        broker = self._broker(params)
        name = _param(params, "topicName", required=True) or ""
        topic = broker.catalog.topic(name)
        if topic is None:
            raise _fail("Invalid parameter: not found the topicName configure!")
        ts = self._timestamp(params)
        data = []
        for pid in self._partitions(broker, topic):
            store = broker.catalog.store_for(topic, pid)
            if store is not None:
                data.append({"topicName": name, "partitionId": pid, "timestamp": ts,
                             "offset": store.start_offset_by_timestamp(ts)})
        return {"result": True, "errCode": 0, "errMsg": "OK", "data": data, "count": len(data)}

    @staticmethod
    def _timestamp(params: dict[str, str]) -> int:
        text = _param(params, "timestamp")
        if text is not None:
            try:
                return strict_int(text)
            except ValueError:
                raise _fail(f"Parameter timestamp must be epoch milliseconds, got {text!r}") from None
        return BrokerWebApi._date(params, "recordTime", required=True) or 0

    def _manual_set(self, params: dict[str, str]) -> dict[str, Any]:
        broker = self._broker(params)
        topic_name = _param(params, "topicName", required=True) or ""
        group = _param(params, "groupName", required=True) or ""
        _param(params, "modifyUser", required=True)
        pid = _int_param(params, "partitionId", -1, 0, 2**31 - 1)
        text = _param(params, "manualOffset", required=True) or ""
        try:
            offset = strict_int(text)
        except ValueError:
            raise _fail(f"Parameter manualOffset must be an integer, got {text!r}") from None
        _topic, store = self._store(broker, topic_name, pid)
        if offset < store.min_offset:
            raise _fail(f"Invalid parameter: manualOffset lower than Current MinOffset:({offset}<{store.min_offset})")
        if offset > store.max_offset:
            raise _fail(f"Invalid parameter: manualOffset bigger than Current MaxOffset:({offset}>{store.max_offset})")
        old = self._reset(broker, group, topic_name, pid, offset, store)
        broker.offsets.save()
        return {"result": True, "errCode": 0, "errMsg": "Manual update current Offset success!", "oldOffset": old}

    def _set_offset(self, params: dict[str, str]) -> dict[str, Any]:
        broker = self._broker(params)
        groups = _names(params, "groupName", required=True)
        manual = _bool_param(params, "manualSet", False)
        if _param(params, "manualSet") is None:
            raise _fail("Parameter manualSet is required and must not be blank!")
        _param(params, "modifyUser", required=True)
        if manual:
            resets = self._manual_offsets(broker, _param(params, "offsetJsonInfo", required=True) or "")
        else:
            resets = []
            for name in _names(params, "topicName", required=True):
                topic = broker.catalog.topic(name)
                if topic is None:
                    continue
                for pid in self._partitions(broker, topic):
                    store = broker.catalog.store_for(topic, pid)
                    if store is not None:
                        resets.append((name, pid, store.max_offset, store))
        for group in groups:
            for name, pid, offset, store in resets:
                self._reset(broker, group, name, pid, offset, store)
        broker.offsets.save()
        return {"result": True, "errCode": 0, "errMsg": "OK"}

    def _manual_offsets(self, broker: Broker, text: str) -> list[tuple[str, int, int, MessageStore]]:
        """validManOffsetResetInfo: ``{"brokerId:topic:partitionId": offset}`` of this broker, clamped."""
        try:
            obj = json.loads(text)
        except (ValueError, RecursionError):
            obj = None
        if not isinstance(obj, dict) or len(obj) > MAX_OFFSET_KEYS:
            raise _fail("Parameter offsetJsonInfo's value must be a JSON object!")
        local = str(broker.config.broker_id)
        out = []
        for key, value in obj.items():
            items = str(key).split(":")
            if len(items) != 3:
                raise _fail(f"Parameter offsetJsonInfo's key invalid:{key} must be brokerId:topicName:partitionId !")
            bid, name, part = (i.strip() for i in items)
            topic = broker.catalog.topic(name)
            if bid != local or topic is None:
                continue
            try:
                pid = strict_int(part)
            except ValueError:
                raise _fail(f"Parameter offsetJsonInfo's key invalid:{key}'s partitionId value not number!") from None
            if isinstance(value, bool) or not isinstance(value, int):
                raise _fail(f"Parameter offsetJsonInfo's value of {key} must be an integer!")
            store = broker.catalog.store_for(topic, pid)
            if store is None:
                continue
            out.append((name, pid, min(max(value, store.min_offset), store.max_offset), store))
        if not out:
            raise _fail("Parameter offsetJsonInfo's value is invalid!")
        return out

    def _clone_offset(self, params: dict[str, str]) -> dict[str, Any]:
        broker = self._broker(params)
        source = _param(params, "sourceGroupName", required=True) or ""
        topics = _names(params, "topicName", required=False)
        if source not in self._booked(broker):  # checked first, as the real broker does
            raise _fail(f"Parameter sourceGroupName: {source} has not been registered on this Broker!")
        subscribed = self._group_topics(broker, source)
        if not subscribed:
            raise _fail(f"Parameter sourceGroupName: subscribed topic set of {source} query result is null!")
        chosen = subscribed if not topics else subscribed & set(topics)
        if not chosen:
            raise _fail(f"Parameter sourceGroupName: {source} unsubscribed to the specified topic set!")
        targets = _names(params, "targetGroupName", required=True)
        _param(params, "modifyUser", required=True)
        for name in sorted(chosen):
            topic = broker.catalog.topic(name)
            if topic is None:
                continue
            for pid in self._partitions(broker, topic):
                store = broker.catalog.store_for(topic, pid)
                if store is None:
                    continue
                offset = self._committed(broker, source, name, pid, store)
                for target in targets:
                    self._reset(broker, target, name, pid, offset, store)
        broker.offsets.save()
        return {"result": True, "errCode": 0, "errMsg": "OK"}

    def _set_offset_by_time(self, params: dict[str, str]) -> dict[str, Any]:
        """adminSetGroupOffSetByTime: the group's offsets from its first history record at or after
        ``recordTime`` (and not after ``endTime``, default 5 minutes later); before / after answered."""
        broker = self._broker(params)
        group = _param(params, "groupName", required=True) or ""
        _param(params, "modifyUser", required=True)
        start = self._date(params, "recordTime", required=True) or 0
        end_given = self._date(params, "endTime", required=False)
        end = start + 5 * 60 * 1000 if end_given is None else end_given
        if end < start:
            raise _fail("Parameter endTime value must >= recordTime")
        topics = _names(params, "topicName", required=False)
        history = self._history(broker)
        try:
            rec = history.find(group, start, end)
        except ValueError as exc:
            raise _fail(str(exc)) from None
        resets = []
        for item in rec.get("records") or []:
            name = str(item.get("topic") or "")
            topic = broker.catalog.topic(name)
            if topic is None or (topics and name not in topics):
                continue
            for store_rec in item.get("offsets") or []:
                for part in store_rec.get("parts") or []:
                    pid, cfm = part.get("partId"), part.get("iCfm")
                    store = broker.catalog.store_for(topic, pid) if isinstance(pid, int) else None
                    if store is not None and isinstance(cfm, int):
                        resets.append((name, pid, min(max(cfm, store.min_offset), store.max_offset), store))
        if not resets:
            raise _fail("Not found history offset value!")
        chosen = sorted({r[0] for r in resets})
        before = self._group_offsets(broker, group, chosen)
        for name, pid, offset, store in resets:
            self._reset(broker, group, name, pid, offset, store)
        broker.offsets.save()
        after = self._group_offsets(broker, group, chosen)
        return {"result": True, "errCode": 0, "errMsg": "OK",
                "data": [{"groupName": group, "before": before, "after": after}], "count": 1}

    def _group_history(self, params: dict[str, str]) -> dict[str, Any]:
        """adminQueryGroupHistoryOffSet: per group, its first ``msgCount`` history records at or after
        ``recordTime``, or ``result: false`` "Could not find record!" inside a successful answer."""
        broker = self._broker(params)
        groups = _names(params, "groupName", required=True)
        count = _int_param(params, "msgCount", 1, 1, 2**31 - 1)
        start = self._date(params, "recordTime", required=True) or 0
        history = self._history(broker)
        data: list[dict[str, Any]] = []
        for group in groups:
            records = history.find_all(group, start, count)
            if records:
                data.append({"groupName": group, "result": True, "errMsg": "ok", "records": records,
                             "recordCount": len(records)})
            else:
                data.append({"groupName": group, "result": False, "errMsg": "Could not find record!"})
        return {"result": True, "errCode": 0, "errMsg": "OK", "data": data, "count": len(data)}

    def _history(self, broker: Broker) -> OffsetHistory:
        history = self.histories.get(broker.config.broker_id)
        if history is None:
            history = self.histories[broker.config.broker_id] = OffsetHistory(broker.config.data_dir)
        return history

    @staticmethod
    def _date(params: dict[str, str], name: str, *, required: bool) -> int | None:
        text = _param(params, name, required=required)
        if text is None:
            return None
        try:
            return int(time.mktime(time.strptime(text, "%Y%m%d%H%M%S")) * 1000)
        except (ValueError, OverflowError):
            raise _fail(f"Parameter {name}'s value {text} parse error, required value format is "
                        "yyyyMMddHHmmss") from None
