"""Admin views of the master's state (``admin_query_consume_group_detail`` and friends): read-only
JSON builders, kept apart from the RPC handlers that change that state."""

from __future__ import annotations

from typing import Any

from tubemq.protocol.constants import META_VALUE_UNDEFINED

from .balancer import ServerBalancer
from .groups import CONSUME_BOUND, CONSUME_CLIENT_REB, CONSUME_UNBOUND, GroupRegistry

#: Admin JSON constants seen in captures (``rebInfo``): default broker/client rate.
DEF_BROKER_CLIENT_RATE = 1000


def group_names(registry: GroupRegistry) -> list[str]:
    return sorted(registry.groups)


def group_detail(registry: GroupRegistry, balancer: ServerBalancer, group: str) -> dict[str, Any]:
    """``admin_query_consume_group_detail`` JSON for one group (captures s2/s3/s5 ``admin_api``)."""
    g = registry.groups.get(group)
    out: dict[str, Any] = {"result": True, "errCode": 0, "errMsg": "OK"}
    if g is None:
        out.update(count=0, topicSet=[], consumeGroup=group)
        out["re-rebalance"] = {}
        out.update(
            isBandConsume=CONSUME_UNBOUND, rebInfo={"isRebalanced": False}, filterConds={}, data=[]
        )
        return out
    out.update(count=len(g.consumers), topicSet=sorted(g.topics), consumeGroup=group)
    out["re-rebalance"] = {}
    out["isBandConsume"] = g.consume_type
    if g.consume_type == CONSUME_BOUND:  # WebOtherInfoHandler: the bound session's state
        out.update(
            isNotAllocate=g.not_allocated,
            sessionKey=g.session_key,
            isSelectBig=g.select_big,
            reqSourceCount=g.source_count,
            curSourceCount=len(g.consumers),
            rebalanceCheckTime=g.check_cycle,
        )
    if g.consume_type == CONSUME_CLIENT_REB:
        out["topicMetaId"] = g.topic_meta_id
        out["metaDetails"] = list(g.topic_meta.values())
        out["rebInfo"] = {"isRebalanced": False}
    elif g.balanced:
        out["rebInfo"] = {
            "isRebalanced": True,
            "checkPasted": True,
            "defBClientRate": DEF_BROKER_CLIENT_RATE,
            "confBClientRate": META_VALUE_UNDEFINED,
            "curBClientRate": g.cur_client_rate,
        }
    else:
        out["rebInfo"] = {"isRebalanced": False}
    out["filterConds"] = {t: sorted(v) for t, v in sorted(g.conditions.items())}
    data = []
    for c in g.consumers.values():
        item: dict[str, Any] = {
            "consumerId": c.consumer_id,
            "receivedFrom": c.remote_host,
            "isOverTLS": c.over_tls,
        }
        if g.consume_type == CONSUME_BOUND:
            item["initReSetPartCount"] = len(c.required_partitions)
            item["initReSetPartInfo"] = [
                {"partitionKey": k, "Offset": v} for k, v in c.required_partitions.items()
            ]
        if g.consume_type == CONSUME_CLIENT_REB:
            item["sourceCount"] = c.source_count
            item["nodeId"] = c.node_id
        parts = balancer.record(c.consumer_id)
        item["parCount"] = len(parts)
        item["parInfo"] = [
            {
                "partId": p.partition_id,
                "brokerAddr": f"{p.broker_id}:{p.host}:{p.port}",
                "topicName": p.topic,
            }
            for p in parts
        ]
        data.append(item)
    out["data"] = data
    return out
