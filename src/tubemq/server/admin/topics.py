"""``admin_modify_topic_info``: change a deployed topic's partition count and publish / subscribe flags.

The real master registers this (deprecated) name for ``admin_update_topic_deploy_info``
(``WebTopicDeployHandler.adminModifyTopicDeployInfo``): parameters ``topicName`` (comma list),
``brokerId`` (comma list), ``numPartitions``, ``acceptPublish``, ``acceptSubscribe`` (each optional),
and an answer with one record per (broker, topic): ``{"brokerId", "topicName", "success", "errCode",
"errInfo"}`` (tests/data/admin/real/topics.json). Partitions may only grow (407 "Partition number less than
before", the real master's row): existing partitions keep their data and offsets, so a shrink would
strand acknowledged messages; the same values again answer 403 "not changed".

The embedded metadata keeps one deployment per topic (the same on every broker it is on), so a change
applies to the topic on all its brokers; ``brokerId`` selects which records the answer lists and must
name brokers the topic is deployed on.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from tubemq.codec import DEFAULT_MAX_PARTITIONS
from tubemq.errors import ConfigError

from .brokers import ERR_ILLEGAL_CHANGE, ERR_NOT_EXIST, ERR_UNCHANGED
from .params import (
    ERR_BAD_REQUEST,
    _AdminError,
    _bool_param,
    _int_items,
    _int_param,
    _ok,
    _param,
    _topic_names,
)

if TYPE_CHECKING:
    from ..meta import MetaStore, TopicConf

__all__ = ["modify_topic_info"]

log = logging.getLogger("tubemq.server.admin")


def _row(bid: int, name: str, code: int = 200, info: str = "Ok!") -> dict[str, Any]:
    return {"brokerId": bid, "topicName": name, "success": code == 200, "errCode": code, "errInfo": info}


def _changes(params: dict[str, str]) -> dict[str, Any]:
    """The fields the call asks to change (absent parameters keep their value)."""
    changes: dict[str, Any] = {}
    if _param(params, "numPartitions") is not None:
        changes["num_partitions"] = _int_param(params, "numPartitions", 0, 1, DEFAULT_MAX_PARTITIONS)
    if _param(params, "acceptPublish") is not None:
        changes["accept_publish"] = _bool_param(params, "acceptPublish", True)
    if _param(params, "acceptSubscribe") is not None:
        changes["accept_subscribe"] = _bool_param(params, "acceptSubscribe", True)
    if not changes:
        raise _AdminError(
            ERR_BAD_REQUEST, "Parameter numPartitions, acceptPublish or acceptSubscribe is required: nothing to modify!"
        )
    return changes


def _refusal(conf: TopicConf, changes: dict[str, Any], brokers: int) -> tuple[int, str] | None:
    """Why the change cannot apply to this topic (None: it can): (row code, text; ``{record}`` is
    replaced by the record's ``brokerId:topicName``)."""
    if all(getattr(conf, k) == v for k, v in changes.items()):
        return ERR_UNCHANGED, "Topic deploy configure not changed!"
    parts = changes.get("num_partitions")
    if parts is None:
        return None
    if parts < conf.num_partitions:  # the real master's words, its missing space included
        return ERR_ILLEGAL_CHANGE, (f"Partition number less than before, new value is {parts}, current value is "
                                    f"{conf.num_partitions}in brokerId-topicName({{record}}) record!")
    total = parts * conf.num_stores * max(1, brokers)
    if total > DEFAULT_MAX_PARTITIONS:
        return ERR_BAD_REQUEST, (
            f"numPartitions {parts} x numTopicStores {conf.num_stores} x {brokers} broker(s) = {total} partitions,"
            f" over the {DEFAULT_MAX_PARTITIONS} partitions per topic a client accepts (max_partitions)"
        )
    return None


def modify_topic_info(meta: MetaStore, params: dict[str, str]) -> dict[str, Any]:
    """Apply the change to each named topic whose every selected record accepts it; answer per record."""
    names = _topic_names(params, required=True)
    wanted: list[int] | None = None
    text = _param(params, "brokerId")
    if text is not None:
        wanted = sorted(set(_int_items("brokerId", text))) or None
    changes = _changes(params)
    rows: list[dict[str, Any]] = []
    for name in names:
        conf = meta.get(name)
        deployed = [] if conf is None else [b for b in sorted(meta.brokers) if conf.on_broker(b)]
        selected = wanted if wanted is not None else (deployed or [0])
        if conf is None:
            rows += [_row(b, name, ERR_NOT_EXIST, f"Not found topic deploy configure for brokerId-topicName({b}:{name})!")
                     for b in selected]
            continue
        reason = _refusal(conf, changes, len(deployed))
        topic_rows = []
        for bid in selected:
            if bid not in meta.brokers:
                topic_rows.append(_row(bid, name, ERR_NOT_EXIST, f"Not found broker configure record by brokerId={bid}, "
                                       "please create the broker's configure first!"))
            elif bid not in deployed:
                info = f"Not found topic deploy configure for brokerId-topicName({bid}:{name})!"
                topic_rows.append(_row(bid, name, ERR_NOT_EXIST, info))
            elif reason is not None:
                topic_rows.append(_row(bid, name, reason[0], reason[1].replace("{record}", f"{bid}:{name}")))
            else:
                topic_rows.append(_row(bid, name))
        if all(r["success"] for r in topic_rows):
            new = {k: v for k, v in changes.items() if getattr(conf, k) != v}
            if new:
                try:
                    meta.update_topic(name, **new)
                except ConfigError as exc:
                    topic_rows = [_row(b, name, ERR_BAD_REQUEST, str(exc)) for b in selected]
                else:
                    log.info("topic %s modified: %s", name, new)
        rows += topic_rows
    return _ok(data=rows, count=len(rows))
