"""The subset of the real master's HTTP admin API (``/webapi.htm``) that scripts use most.

``GET|POST /webapi.htm?type=op_query|op_modify&method=...`` with parameters in the query string or a
form body (the real servlet reads both). Answers are JSON shaped like the real master's:
``{"result": bool, "errCode": int, "errMsg": str, "data": [...]}``; the group detail follows the
captured ``admin_api`` snapshots (s2, s3, s5). Modify calls require ``confModAuthToken`` when the
server has an ``admin_token``.

Methods: ``admin_add_new_topic_record``, ``admin_modify_topic_info`` (admin_topics.py), ``admin_query_topic_info``,
``admin_delete_topic_info``
(+ ``admin_remove_topic_info``, a no-op after delete, as scripts for real masters call both),
``admin_query_consume_group_detail``.

A deliberately small HTTP/1.1 server on asyncio streams: one request per connection
(``Connection: close``), bounded header and body sizes and a read timeout, so a stuck or hostile
client costs one bounded coroutine.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
from collections.abc import Callable
from typing import Any

from tubemq.codec import DEFAULT_MAX_PARTITIONS
from tubemq.errors import ConfigError
from tubemq.protocol.constants import DEFAULT_MAX_MSG_SIZE

from ..config import ServerConfig
from ..meta import MetaStore, TopicConf
from .brokers import (
    _PUB_SUB,
    DEFAULT_BROKER_PORT,
    DEFAULT_BROKER_TLS_PORT,
    DEFAULT_BROKER_WEB_PORT,
    ERR_EXISTS,
    ERR_ILLEGAL_CHANGE,
    ERR_ILLEGAL_STATUS,
    ERR_NOT_EXIST,
    ERR_UNCHANGED,
    ONLINE_STATUSES,
    STATUS_DRAFT,
    STATUS_OFFLINE,
    STATUS_ONLINE,
    BrokerConfs,
    _broker_record,
    _broker_result,
    _manage_status,
    _topic_result,
)
from .params import (
    ERR_BAD_REQUEST,
    MB,
    TOKEN_MISSING,
    TOKEN_WRONG,
    Handler,
    _AdminError,
    _bool_param,
    _fail,
    _int_items,
    _int_param,
    _ok,
    _param,
    _topic_names,
    check_users,
)
from .server import AdminServer
from .topics import _row, modify_topic_info

__all__ = ["AdminApi", "AdminServer", "BrokerConfs"]

log = logging.getLogger("tubemq.server.admin")


class AdminApi:
    """The request logic, independent of HTTP (unit-testable): ``handle(params) -> JSON dict``."""

    def __init__(
        self,
        config: ServerConfig,
        meta: MetaStore,
        master: Any,
        broker: Any = None,
        *,
        create_topic: Callable[..., TopicConf] | None = None,
        delete_topic: Callable[[str], bool] | None = None,
    ) -> None:
        self.config = config
        self.meta = meta
        self.master = master
        self.broker = broker
        self._create = create_topic or meta.create_topic
        self._delete = delete_topic or meta.delete_topic
        self._broker_confs: BrokerConfs | None = None
        #: calls added by the embedding server (e.g. the broker registration of server/registration.py)
        self.extra_methods: dict[tuple[str, str], Handler] = {}
        #: the web port answering a broker's web API (admin_offsets.py), 0 = none (set by the server)
        self.broker_web_port: Callable[[int], int] = lambda broker_id: 0

    def handle(self, params: dict[str, str]) -> dict[str, Any]:
        """As the real master: ``type`` is not checked (the method decides), a modify method needs the
        token, and a token given to any method must be the right one."""
        try:
            method = _param(params, "method")
            if method is None:
                raise _AdminError(ERR_BAD_REQUEST, "Bad request from client, Please take with method parameter!")
            found = [(op, h) for (op, name), h in self._methods().items() if name == method]
            if not found:
                raise _AdminError(ERR_BAD_REQUEST, f"Unsupported method {method}")
            op, handler = found[0]
            self._check_token(params, required=op == "op_modify")
            check_users(params)
            return handler(params)
        except _AdminError as exc:
            return _fail(exc.code, exc.message)

    def _methods(self) -> dict[tuple[str, str], Handler]:
        return {
            ("op_modify", "admin_add_new_topic_record"): self._add_topic,
            ("op_modify", "admin_delete_topic_info"): self._delete_topic,
            ("op_modify", "admin_remove_topic_info"): self._remove_topic,
            ("op_modify", "admin_modify_topic_info"): lambda params: modify_topic_info(self.meta, params),
            ("op_query", "admin_query_topic_info"): self._query_topics,
            ("op_query", "admin_query_consume_group_detail"): self._group_detail,
            ("op_modify", "admin_add_broker_configure"): self._add_broker_conf,
            ("op_modify", "admin_online_broker_configure"): self._online_broker_conf,
            ("op_modify", "admin_reload_broker_configure"): self._reload_broker_conf,
            ("op_modify", "admin_offline_broker_configure"): self._offline_broker_conf,
            ("op_modify", "admin_delete_broker_configure"): self._delete_broker_conf,
            ("op_query", "admin_query_broker_configure"): self._query_broker_conf,
            ("op_query", "admin_query_broker_run_status"): self._query_broker_run_status,
            ("op_modify", "admin_update_topic_control_info"): self._update_topic_ctrl,
            ("op_query", "admin_query_topic_control_info"): self._query_topic_ctrl,
            **self.extra_methods,
        }

    def _check_token(self, params: dict[str, str], *, required: bool) -> None:
        expected = self.config.admin_token
        if expected is None:
            return
        given = (params.get("confModAuthToken") or "").strip()
        if not given:
            if required:
                raise _AdminError(ERR_BAD_REQUEST, TOKEN_MISSING)
            return
        if not hmac.compare_digest(given.encode(), expected.encode()):
            raise _AdminError(ERR_BAD_REQUEST, TOKEN_WRONG)

    def _add_topic(self, params: dict[str, str]) -> dict[str, Any]:
        """One row per (topic, broker) as the real master answers: 402 where the topic already is,
        401 for a broker that has no configure record, the rest created."""
        names = _topic_names(params, required=True)
        wanted = self._wanted_brokers(params)
        partitions = _int_param(params, "numPartitions", 3, 1, 10000)
        stores = _int_param(params, "numTopicStores", 1, 1, 100)
        max_mb = _int_param(params, "maxMsgSizeInMB", 0, 0, 20)
        max_size = max_mb * MB if max_mb else None
        accept_pub = _bool_param(params, "acceptPublish", True)
        accept_sub = _bool_param(params, "acceptSubscribe", True)
        known = [b for b in wanted if b in self.meta.brokers] if wanted is not None else None
        self._check_client_limits(partitions, stores, len(known) if known else len(self.meta.brokers))
        rows: list[dict[str, Any]] = []
        for name in names:
            conf = self.meta.get(name)
            targets = wanted if wanted is not None else sorted(self.meta.brokers)
            new: list[int] = []
            for bid in targets:
                if bid not in self.meta.brokers:
                    rows.append(_row(bid, name, ERR_NOT_EXIST, f"Not found broker configure record by brokerId={bid}, "
                                     "please create the broker's configure first!"))
                elif conf is not None and conf.on_broker(bid):
                    rows.append(_row(bid, name, ERR_EXISTS, f"Existed record found for brokerId-topicName({bid}:{name})!"))
                else:
                    new.append(bid)
            if not new:
                continue
            try:
                if conf is None:
                    ids = new if wanted is not None else None
                    conf = self._create(name, partitions, stores, max_size, broker_ids=ids)
                    if not (accept_pub and accept_sub):
                        self.meta.update_topic(name, accept_publish=accept_pub, accept_subscribe=accept_sub)
                else:  # one deployment per topic here: the new brokers get the existing one
                    self.meta.update_topic(name, broker_ids=sorted(set(conf.broker_ids or []) | set(new)))
            except (ConfigError, ValueError) as exc:
                raise _AdminError(ERR_BAD_REQUEST, str(exc)) from None
            rows += [_row(bid, name) for bid in new]
        return _ok(data=rows, count=len(rows))

    def _wanted_brokers(self, params: dict[str, str]) -> list[int] | None:
        """``brokerId=1,2`` in order without repeats (None when absent); unknown ids are kept (row 401)."""
        text = _param(params, "brokerId")
        if text is None:
            return None
        return list(dict.fromkeys(_int_items("brokerId", text))) or None

    @staticmethod
    def _check_client_limits(partitions: int, stores: int, brokers: int) -> None:
        """Refuse a topic the clients would refuse: a client expands a topic to brokers x stores x
        partitions and accepts at most ``max_partitions`` (10000 by default) per topic."""
        brokers = max(1, brokers)
        total = partitions * stores * brokers
        if total > DEFAULT_MAX_PARTITIONS:
            raise _AdminError(
                ERR_BAD_REQUEST,
                f"numPartitions {partitions} x numTopicStores {stores} x {brokers} broker(s) = {total} partitions,"
                f" over the {DEFAULT_MAX_PARTITIONS} partitions per topic a client accepts (max_partitions)",
            )

    def _topic_targets(self, params: dict[str, str]) -> list[tuple[str, TopicConf | None, list[int], list[int]]]:
        """Per named topic: its config, the brokers it is deployed on and the brokers the call is about
        (``brokerId`` when given, else where it is deployed, else broker 1 so an unknown topic gets a row)."""
        names = _topic_names(params, required=True)
        wanted = self._wanted_brokers(params)
        out = []
        for name in names:
            conf = self.meta.get(name)
            deployed = [] if conf is None else [b for b in sorted(self.meta.brokers) if conf.on_broker(b)]
            out.append((name, conf, deployed, wanted if wanted is not None else (deployed or [1])))
        return out

    def _delete_topic(self, params: dict[str, str]) -> dict[str, Any]:
        """The real master's rule: a topic is deleted only once it accepts neither publish nor
        subscribe (406 otherwise); 401 where it is not deployed. Here a delete drops the topic's data
        at once (a real master soft-deletes and the brokers drop the data later)."""
        rows: list[dict[str, Any]] = []
        for name, conf, deployed, targets in self._topic_targets(params):
            topic_rows = []
            for bid in targets:
                if conf is None or bid not in deployed:
                    topic_rows.append(_row(bid, name, ERR_NOT_EXIST, f"Not found the topic {name}'s deploy configure in "
                                           f"broker={bid}, please confirm the configure first!"))
                elif conf.accept_publish or conf.accept_subscribe:
                    topic_rows.append(_row(bid, name, ERR_ILLEGAL_STATUS, "The values of acceptPublish and "
                                           "acceptSubscribe must be false before change status of "
                                           f"brokerId-topicName({bid}:{name}) record!"))
                else:
                    topic_rows.append(_row(bid, name))
            if conf is not None and all(r["success"] for r in topic_rows):
                rest = [b for b in deployed if b not in targets]
                if rest:  # deleted on some of its brokers only: it stays on the others
                    self.meta.update_topic(name, broker_ids=rest)
                else:
                    self._delete(name)
            rows += topic_rows
        return _ok(data=rows, count=len(rows))

    def _remove_topic(self, params: dict[str, str]) -> dict[str, Any]:
        """After a delete the topic is gone here, so a remove succeeds; a topic still deployed was
        never deleted: 406, as a real master answers."""
        rows: list[dict[str, Any]] = []
        for name, conf, _deployed, targets in self._topic_targets(params):
            for bid in targets:
                if conf is not None and conf.on_broker(bid):
                    rows.append(_row(bid, name, ERR_ILLEGAL_STATUS,
                                     f"Please softly deleted the brokerId-topicName({bid}:{name}) record first!"))
                else:
                    rows.append(_row(bid, name))
        return _ok(data=rows, count=len(rows))

    def _query_topics(self, params: dict[str, str]) -> dict[str, Any]:
        wanted = set(_topic_names(params, required=False))
        topics = [t for t in self.meta.topics() if not wanted or t.name in wanted]
        return _ok(count=len(topics), data=[self._topic_record(t) for t in topics])

    def _topic_record(self, conf: TopicConf) -> dict[str, Any]:
        default = self.config.default_max_msg_size or DEFAULT_MAX_MSG_SIZE
        size = conf.effective_max_msg_size(default)
        per_broker = []
        for bid in sorted(self.meta.brokers):
            if not conf.on_broker(bid):
                continue
            b = self.meta.brokers[bid]
            per_broker.append(
                {
                    "topicName": conf.name,
                    "brokerId": bid,
                    "brokerIp": b.host,
                    "brokerPort": b.port,
                    "numPartitions": conf.num_partitions,
                    "numTopicStores": conf.num_stores,
                    "acceptPublish": conf.accept_publish,
                    "acceptSubscribe": conf.accept_subscribe,
                    "maxMsgSizeInMB": size // MB,
                    "topicStatusId": 1 if conf.closed else 0,
                    "createDate": conf.create_time_ms,
                }
            )
        total = conf.num_partitions * conf.num_stores * len(per_broker)
        return {
            "topicName": conf.name,
            "maxMsgSizeInMB": size // MB,
            "infoCount": len(per_broker),
            "totalCfgNumPart": total,
            "isSrvAcceptPublish": conf.accept_publish and not conf.closed,
            "isSrvAcceptSubscribe": conf.accept_subscribe and not conf.closed,
            "totalRunNumPartCount": total,
            "topicInfo": per_broker,
        }

    def _group_detail(self, params: dict[str, str]) -> dict[str, Any]:
        group = _param(params, "consumeGroup", required=True) or ""
        detail: dict[str, Any] = self.master.group_detail(group)
        return detail


    # ---- broker configure and topic control: what deployment tooling calls

    @property
    def broker_confs(self) -> BrokerConfs:
        if self._broker_confs is None:
            self._broker_confs = BrokerConfs(self.config.data_dir)
        return self._broker_confs

    def _broker_records(self) -> dict[int, dict[str, Any]]:
        """Every broker configure record: the embedded brokers (online) and the ones added by the API."""
        out: dict[int, dict[str, Any]] = {}
        for bid, b in sorted(self.meta.brokers.items()):
            web = self.broker_web_port(bid)
            out[bid] = _broker_record(bid, b.host, b.port, b.tls_port or DEFAULT_BROKER_TLS_PORT, web, STATUS_ONLINE)
        for bid, rec in self.broker_confs.records.items():
            out.setdefault(bid, dict(rec))
        return out

    def _broker_running(self, bid: int) -> bool:
        if bid not in self.meta.brokers:
            return False
        online = getattr(self.master, "_broker_online", None)
        return bool(online(bid)) if callable(online) else True

    def _add_broker_conf(self, params: dict[str, str]) -> dict[str, Any]:
        ip = _param(params, "brokerIp", required=True) or ""
        try:
            addr = ipaddress.IPv4Address(ip)
        except ValueError:
            raise _AdminError(ERR_BAD_REQUEST, f"Parameter brokerIp must be an IPv4 address, got {ip!r}") from None
        bid = _int_param(params, "brokerId", 0, 0, 2**31 - 1)
        if bid <= 0:  # the real master derives the id from the address (abs of the signed int)
            bid = abs(int(addr) - (1 << 32) if int(addr) >= 1 << 31 else int(addr))
        status = _manage_status(params, default=STATUS_DRAFT)
        records = self._broker_records()
        if any(r["brokerIp"] == ip for r in records.values()):
            raise _AdminError(ERR_BAD_REQUEST, f"Duplicated broker configure record, query by brokerIp : {ip}")
        if bid in records:
            raise _AdminError(ERR_BAD_REQUEST, f"Duplicated broker configure record, query by brokerId : {bid}")
        rec = _broker_record(
            bid,
            ip,
            _int_param(params, "brokerPort", DEFAULT_BROKER_PORT, 1, 65535),
            _int_param(params, "brokerTLSPort", DEFAULT_BROKER_TLS_PORT, 1, 65535),
            _int_param(params, "brokerWebPort", DEFAULT_BROKER_WEB_PORT, 1, 65535),
            status,
            region_id=_int_param(params, "regionId", 0, 0, 2**31 - 1),
            group_id=_int_param(params, "groupId", 0, 0, 2**31 - 1),
        )
        rec["createUser"] = rec["modifyUser"] = _param(params, "createUser", "") or ""
        self.broker_confs.put(rec)
        return _ok(data=[_broker_result(bid, ip)], count=1)

    def _broker_id_set(self, params: dict[str, str]) -> list[int]:
        text = _param(params, "brokerId", required=True) or ""
        ids = list(_int_items("brokerId", text))
        if not ids:
            raise _AdminError(ERR_BAD_REQUEST, "Parameter brokerId is required and must not be blank!")
        return list(dict.fromkeys(ids))

    def _online_broker_conf(self, params: dict[str, str]) -> dict[str, Any]:
        results = []
        for bid in self._broker_id_set(params):
            rec = self._broker_records().get(bid)
            if rec is None:
                results.append(_broker_result(bid, "", ERR_NOT_EXIST, f"Not found broker configure for brokerId({bid})!"))
            else:
                results.append(self._move_to(rec, STATUS_ONLINE, params))
        return _ok(data=results, count=len(results))

    def _move_to(self, rec: dict[str, Any], status: str, params: dict[str, str]) -> dict[str, Any]:
        """A broker record's manage status changed (403 row when it already has it)."""
        if rec["manageStatus"] == status:
            return _broker_result(rec["brokerId"], "", ERR_UNCHANGED, f"Unchanged  manageStatus({status})!")
        rec["manageStatus"] = status
        rec["modifyUser"] = _param(params, "modifyUser", "") or ""
        self.broker_confs.put(rec)
        return _broker_result(rec["brokerId"], "")

    def _reload_broker_conf(self, params: dict[str, str]) -> dict[str, Any]:
        """Embedded brokers apply configuration changes at once: a reload of an online one is a no-op."""
        results = []
        for bid in self._broker_id_set(params):
            rec = self._broker_records().get(bid)
            if rec is None:
                results.append(_broker_result(bid, "", ERR_NOT_EXIST, "The broker configure not exist!"))
            elif rec["manageStatus"] not in ONLINE_STATUSES:
                results.append(_broker_result(
                    bid, "", ERR_ILLEGAL_STATUS,
                    f"The broker manage status by brokerId={bid} is not in online status, can't reload this configure! ",
                ))
            else:
                results.append(_broker_result(bid, rec["brokerIp"]))
        return _ok(data=results, count=len(results))

    def _offline_broker_conf(self, params: dict[str, str]) -> dict[str, Any]:
        """online -> offline, with the real master's rows (a draft one cannot go offline: 407). An
        embedded broker runs in this server and stays in service: 406 (stop the server instead)."""
        results = []
        for bid in self._broker_id_set(params):
            rec = self._broker_records().get(bid)
            if rec is None:
                results.append(_broker_result(bid, "", ERR_NOT_EXIST, f"Not found broker configure for brokerId({bid})!"))
            elif bid in self.meta.brokers:
                results.append(_broker_result(bid, "", ERR_ILLEGAL_STATUS, f"Broker {bid} runs in this embedded server: "
                                              "stop the server to take it out of service!"))
            elif rec["manageStatus"] == STATUS_DRAFT:
                results.append(_broker_result(bid, "", ERR_ILLEGAL_CHANGE, "Illegal manage status, cannot reverse "
                                              f"manageStatus from draft to offline for the broker(brokerId={bid})!"))
            else:
                results.append(self._move_to(rec, STATUS_OFFLINE, params))
        return _ok(data=results, count=len(results))

    def _delete_broker_conf(self, params: dict[str, str]) -> dict[str, Any]:
        """Delete an offline broker's record (406 while online); an unknown id answers success, as on a
        real master. Topics are never deployed on an API-added record here, so nothing is left uncleaned."""
        results = []
        for bid in self._broker_id_set(params):
            rec = self._broker_records().get(bid)
            if rec is None:
                results.append(_broker_result(bid, "null", info="Success"))
            elif bid in self.meta.brokers or rec["manageStatus"] in ONLINE_STATUSES:
                results.append(_broker_result(bid, "null", ERR_ILLEGAL_STATUS,
                                              "Broker manage status is online, please offline first!"))
            else:
                self.broker_confs.remove(bid)
                results.append(_broker_result(bid, "null"))
        return _ok(data=results, count=len(results))

    def _selected_brokers(self, params: dict[str, str]) -> list[dict[str, Any]]:
        ids = set(self._broker_id_set(params)) if _param(params, "brokerId") else None
        ip_text = _param(params, "brokerIp")
        ips = {i.strip() for i in ip_text.split(",") if i.strip()} if ip_text else None
        return [
            r for bid, r in sorted(self._broker_records().items())
            if (ids is None or bid in ids) and (ips is None or r["brokerIp"] in ips)
        ]

    def _query_broker_conf(self, params: dict[str, str]) -> dict[str, Any]:
        data = [{k: v for k, v in r.items() if not k.startswith("_")} for r in self._selected_brokers(params)]
        return _ok(data=data, count=len(data))

    def _query_broker_run_status(self, params: dict[str, str]) -> dict[str, Any]:
        """The real master's layout; booleans of the run state are strings there (``"true"``/``"-"``)."""
        data = []
        for r in self._selected_brokers(params):
            bid = r["brokerId"]
            running = self._broker_running(bid)
            item: dict[str, Any] = {
                "brokerId": bid,
                "brokerIp": r["brokerIp"],
                "brokerPort": r["brokerPort"],
                "brokerWebPort": r["brokerWebPort"],
                "manageStatus": r["manageStatus"],
                "brokerTLSPort": r["brokerTLSPort"],
                "enableTLS": bool(self.config.tls_cert) if running else "-",
                "isRepAbnormal": False,
                "isAutoForbidden": False,
            }
            pub, sub = _PUB_SUB.get(r["manageStatus"], (False, False))
            if r["manageStatus"] == STATUS_DRAFT:
                item.update(runStatus="-", subStatus="-", isConfChanged="-", isConfLoaded="-", isBrokerOnline="-",
                            brokerVersion="-", acceptPublish="-", acceptSubscribe="-")
            elif bid not in self.meta.brokers:
                item.update(runStatus="unRegister", subStatus="-", isConfChanged="-", isConfLoaded="-",
                            isBrokerOnline="-", brokerVersion="-", acceptPublish="-", acceptSubscribe="-")
            else:
                item.update(runStatus="running" if running else "notRegister", subStatus="idle",
                            isConfChanged="false", isConfLoaded="true", isBrokerOnline=str(running).lower(),
                            brokerVersion="-", acceptPublish=str(pub).lower(), acceptSubscribe=str(sub).lower())
            data.append(item)
        return _ok(data=data, count=len(data))

    def _update_topic_ctrl(self, params: dict[str, str]) -> dict[str, Any]:
        """``maxMsgSizeInMB`` (1..20) of existing topics; the broker applies it to the next send."""
        names = _topic_names(params, required=True)
        size_mb = _int_param(params, "maxMsgSizeInMB", -2, 1, 20) if _param(params, "maxMsgSizeInMB") else None
        results = []
        for name in names:
            conf = self.meta.get(name)
            if conf is None:
                results.append(_topic_result(name, ERR_NOT_EXIST, f"Not found topic control configure for topicName({name})!"))
                continue
            if size_mb is not None:
                self.meta.update_topic(name, max_msg_size=size_mb * MB)
            results.append(_topic_result(name))
        return _ok(data=results, count=len(results))

    def _query_topic_ctrl(self, params: dict[str, str]) -> dict[str, Any]:
        wanted = set(_topic_names(params, required=False))
        default = self.config.default_max_msg_size or DEFAULT_MAX_MSG_SIZE
        data = [
            {
                "topicName": t.name,
                "topicNameId": -2,
                "enableAuthControl": False,
                "maxMsgSizeInMB": t.effective_max_msg_size(default) // MB,
            }
            for t in self.meta.topics()
            if not wanted or t.name in wanted
        ]
        return _ok(data=data, count=len(data))
