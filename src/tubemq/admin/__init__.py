"""Administration of a TubeMQ cluster over the master's and brokers' web APIs.

``AdminClient`` (blocking) and ``tubemq.aio.AdminClient`` (asyncio) take the master's admin URL
(``http://master:8080/webapi.htm``, or ``host:port``) and speak the real TubeMQ web API: topics
(``admin_query_topic_info``...), brokers (``admin_query_broker_run_status``...), groups
(``admin_query_consume_group_detail``) and group offsets on the brokers (``admin_query_offset``,
``admin_set_offset``, ``admin_manual_set_current_offset``, ``admin_clone_offset``,
``admin_set_offset_by_time``). The embedded server answers the same calls.
"""

from __future__ import annotations

from tubemq.errors import AdminError, AdminRecordError

from .client import AdminClient
from .types import (
    BrokerResults,
    BrokerStatus,
    GroupDetail,
    GroupMember,
    MemberPartition,
    PartitionOffset,
    PartitionOffsetDetail,
    TimeOffset,
    TopicDeployment,
    TopicInfo,
)

__all__ = [
    "AdminClient",
    "AdminError",
    "AdminRecordError",
    "BrokerResults",
    "BrokerStatus",
    "GroupDetail",
    "GroupMember",
    "MemberPartition",
    "PartitionOffset",
    "PartitionOffsetDetail",
    "TimeOffset",
    "TopicDeployment",
    "TopicInfo",
]
