"""``tubemq.aio.AdminClient``: the asyncio twin of :class:`tubemq.admin.AdminClient` (same operations)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from tubemq.errors import AdminError

from . import _ops
from ._base import When, _AdminBase, create_kwargs
from ._http import Request, call_async
from .types import (
    BrokerResults,
    BrokerStatus,
    GroupDetail,
    PartitionOffset,
    PartitionOffsetDetail,
    TimeOffset,
    TopicInfo,
)

T = TypeVar("T")


class AdminClient(_AdminBase):
    """asyncio admin client: ``async with tubemq.aio.AdminClient("http://master:8080") as admin``.

    Each call is one or a few HTTP requests, each bounded by ``timeout`` seconds, made by the blocking
    client's transport in a worker thread (``asyncio.to_thread``), so proxies and TLS (``ssl_context``,
    ``verify``) behave exactly as in :class:`tubemq.admin.AdminClient`. Refusals raise :class:`tubemq.errors.AdminError`;
    unreachable endpoints :class:`~tubemq.errors.TubeMQConnectionError` / ``TubeMQTimeoutError``.
    Group-offset calls go to the brokers' web APIs, found through the master (``broker_urls`` overrides
    the address of a broker by id). The context manager form exists for symmetry with the other clients.
    """

    async def __aenter__(self) -> AdminClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def close(self) -> None:
        """Nothing to release (one connection per call); here so ``contextlib.closing`` works."""

    async def _run(self, op: _ops.Op[T]) -> T:
        try:
            req = next(op)
            while True:
                try:
                    answer = await self.call_request(req)
                except (AdminError, *_ops.UNREACHABLE) as exc:  # the operation may handle it (a broker skipped)
                    req = op.throw(exc)
                    continue
                req = op.send(answer)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]

    async def call_request(self, req: Request) -> dict[str, Any]:
        return await call_async(req, self.url, self.token, self.timeout, self._tls)

    async def call(self, op_type: str, method: str, **params: Any) -> dict[str, Any]:
        """Any master web API method (``op_query``/``op_modify``); returns the checked JSON answer."""
        return await self.call_request(Request(op_type, method, params))

    # ---- topics

    async def list_topics(self, names: str | Iterable[str] | None = None) -> list[TopicInfo]:
        """``admin_query_topic_info``: every topic, or those named."""
        return await self._run(_ops.list_topics(names))

    async def describe_topic(self, name: str) -> TopicInfo:
        """One topic; ``AdminError`` (code 404) when it does not exist."""
        return await self._run(_ops.describe_topic(name))

    async def create_topic(
        self, name: str, *, partitions: int = 3, stores: int = 1, broker_ids: str | Iterable[int] | None = None,
        max_msg_size_mb: int | None = None, accept_publish: bool = True, accept_subscribe: bool = True,
    ) -> list[dict[str, Any]]:
        """``admin_add_new_topic_record`` on the given brokers (default broker 1); one row per broker.
        A record the master refused (402: exists there) raises :class:`~tubemq.errors.AdminRecordError`."""
        kw = create_kwargs(partitions, stores, broker_ids, max_msg_size_mb, accept_publish, accept_subscribe)
        return await self._run(_ops.create_topic(self._ctx, name, **kw))

    async def update_topic(
        self, names: str | Iterable[str], *, max_msg_size_mb: int | None = None, partitions: int | None = None,
        accept_publish: bool | None = None, accept_subscribe: bool | None = None,
        broker_ids: str | Iterable[int] | None = None,
    ) -> list[dict[str, Any]]:
        """Max message size (``admin_update_topic_control_info``, applied to the next send) and/or
        partitions and flags (``admin_modify_topic_info``, default on every broker the topic is on)."""
        return await self._run(_ops.update_topic(
            self._ctx, names, max_msg_size_mb=max_msg_size_mb, partitions=partitions,
            accept_publish=accept_publish, accept_subscribe=accept_subscribe, broker_ids=broker_ids,
        ))

    async def delete_topic(
        self, name: str, *, broker_ids: str | Iterable[int] | None = None, purge: bool = False,
        stop_first: bool = False,
    ) -> list[dict[str, Any]]:
        """``admin_delete_topic_info`` on ``broker_ids`` (default: every broker the topic is on); ``purge``
        adds ``admin_remove_topic_info`` (a real master's hard delete). A real master refuses (406) while
        the topic accepts publish or subscribe: ``stop_first`` turns both off first. Failed records raise
        :class:`~tubemq.errors.AdminRecordError` (401: not there, 406: still accepting)."""
        return await self._run(_ops.delete_topic(self._ctx, name, broker_ids=broker_ids, purge=purge,
                                               stop_first=stop_first))

    # ---- brokers

    async def brokers(self, broker_ids: str | Iterable[int] | None = None) -> list[BrokerStatus]:
        """``admin_query_broker_run_status``."""
        return await self._run(_ops.brokers(broker_ids))

    async def add_broker(
        self, ip: str, *, broker_id: int | None = None, port: int | None = None, tls_port: int | None = None,
        web_port: int | None = None,
    ) -> list[dict[str, Any]]:
        """``admin_add_broker_configure`` (draft until ``online_brokers``)."""
        return await self._run(_ops.modify_records(
            "admin_add_broker_configure", brokerIp=ip, brokerId=broker_id, brokerPort=port, brokerTLSPort=tls_port,
            brokerWebPort=web_port, createUser=self.user, createDate=_ops._stamp(),
        ))

    async def online_brokers(self, broker_ids: str | Iterable[int]) -> list[dict[str, Any]]:
        """``admin_online_broker_configure`` (draft or offline -> online)."""
        return await self._run(_ops.broker_records(self._ctx, "admin_online_broker_configure", broker_ids))

    async def reload_brokers(self, broker_ids: str | Iterable[int]) -> list[dict[str, Any]]:
        """``admin_reload_broker_configure``."""
        return await self._run(_ops.broker_records(self._ctx, "admin_reload_broker_configure", broker_ids))

    async def offline_brokers(self, broker_ids: str | Iterable[int]) -> list[dict[str, Any]]:
        """``admin_offline_broker_configure``: take online brokers out of service (407 for a draft one)."""
        return await self._run(_ops.broker_records(self._ctx, "admin_offline_broker_configure", broker_ids))

    async def delete_brokers(self, broker_ids: str | Iterable[int], *, reserved_data: bool = True) -> list[dict[str, Any]]:
        """``admin_delete_broker_configure`` of offline brokers (406 while online). A real master also
        refuses (404/406) while topics, its own ``__offset_history__`` included, are deployed there
        unless ``reserved_data`` (``isReservedData``) and their publish / subscribe flags are off."""
        return await self._run(_ops.broker_records(self._ctx, "admin_delete_broker_configure", broker_ids,
                                                 isReservedData=reserved_data))

    # ---- groups and their offsets

    async def list_groups(self) -> BrokerResults[str]:
        """Groups with offsets on any broker (``admin_get_booked_groupname``); a broker whose web API does
        not answer is skipped (WARNING log) and named in the result's ``.unreachable``."""
        return await self._run(_ops.list_groups(self._ctx))

    async def group_detail(self, group: str) -> GroupDetail:
        """``admin_query_consume_group_detail``: topics, consume mode and members with their partitions."""
        return await self._run(_ops.group_detail(group))

    async def group_offsets(self, group: str, topics: str | Iterable[str] | None = None) -> BrokerResults[PartitionOffset]:
        """``admin_query_offset`` on every broker: committed offset, max offset and lag per partition
        (a broker that does not answer: skipped, in ``.unreachable``)."""
        return await self._run(_ops.group_offsets(self._ctx, group, topics))

    async def partition_offset(
        self, group: str, topic: str, broker_id: int, partition_id: int, *, real_offset: bool = False
    ) -> PartitionOffsetDetail:
        """``admin_query_group_offset``: one partition's bounds and the group's offset there."""
        return await self._run(_ops.partition_offset(self._ctx, group, topic, broker_id, partition_id, real_offset=real_offset))

    async def set_offset(self, group: str, topic: str, broker_id: int, partition_id: int, offset: int) -> int:
        """``admin_manual_set_current_offset``; returns the previous offset (out of range: ``AdminError``)."""
        return await self._run(_ops.set_offset(self._ctx, group, topic, broker_id, partition_id, offset))

    async def set_offsets(self, groups: str | Iterable[str], offsets: Mapping[str, int]) -> BrokerResults[int]:
        """``admin_set_offset`` with ``{"brokerId:topic:partitionId": offset}`` (brokers clamp into range);
        returns the brokers set, those that did not answer (nothing set there) in ``.unreachable``."""
        return await self._run(_ops.set_offsets(self._ctx, groups, offsets))

    async def reset_offsets(self, group: str, topic: str, to: str | int) -> BrokerResults[PartitionOffset]:
        """Every partition of ``topic`` to ``"earliest"``, ``"latest"`` or an offset; returns the new state
        (brokers that did not answer, so were not reset: ``.unreachable``)."""
        return await self._run(_ops.reset_offsets(self._ctx, group, topic, to))

    async def offsets_for_times(
        self, topic: str, when: When, partitions: Iterable[tuple[int, int]] | None = None
    ) -> list[TimeOffset]:
        """First index offset appended at or after ``when`` (datetime or epoch ms) per (broker, partition)."""
        return await self._run(_ops.offsets_for_times(self._ctx, topic, when, partitions))

    async def reset_offsets_to_time(self, group: str, topic: str, when: When) -> BrokerResults[PartitionOffset]:
        """Each partition of ``topic`` to its first message at or after ``when``; returns the new state."""
        return await self._run(_ops.reset_offsets_to_time(self._ctx, group, topic, when))

    async def set_offsets_by_time(
        self, group: str, when: When | str, topics: str | Iterable[str] | None = None
    ) -> BrokerResults[dict[str, Any]]:
        """Back to the offsets the group itself had committed at ``when`` (the brokers' offset history,
        read with ``admin_get_group_history_offset`` and set with ``admin_set_offset``: works on TubeMQ
        2.5 and on the embedded server); one row per partition set."""
        return await self._run(_ops.set_offsets_by_time(self._ctx, group, when, topics))

    async def clone_offsets(
        self, source: str, targets: str | Iterable[str], topics: str | Iterable[str] | None = None
    ) -> int:
        """``admin_clone_offset``: copy ``source``'s offsets to ``targets``; returns the brokers done."""
        return await self._run(_ops.clone_offsets(self._ctx, source, targets, topics))
