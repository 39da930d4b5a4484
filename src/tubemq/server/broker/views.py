"""The broker's admin views: groups and per-partition offsets/lag (admin API, CLI).

Read-only, over the parts that own the state: registrations, committed offsets and the catalog.
"""

from __future__ import annotations

from typing import Any

from .catalog import Catalog
from .offsets import OffsetStore
from .registry import Registrations


class BrokerViews:
    """Read-only views of the broker's consumer state."""

    def __init__(self, registrations: Registrations, offsets: OffsetStore, catalog: Catalog) -> None:
        self.registrations = registrations
        self.offsets = offsets
        self.catalog = catalog

    def groups(self) -> list[str]:
        """Groups with a registration or a committed offset on this broker."""
        return sorted(self.registrations.groups() | set(self.offsets.groups()))

    def group_detail(self, group: str) -> list[dict[str, Any]]:
        """Per topic/partition: owner, committed offset, in-flight bytes, max offset and lag."""
        keys = {(t, p) for (t, p) in self.offsets.partitions(group)} | self.registrations.partitions(group)
        rows = []
        for topic_name, pid in sorted(keys):
            key = (group, topic_name, pid)
            topic = self.catalog.topic(topic_name)
            store = self.catalog.store_for(topic, pid) if topic is not None else None
            max_offset = store.max_offset if store is not None else -1
            committed = self.offsets.get(*key)
            if committed is None:
                committed = store.min_offset if store is not None else -1
            reg = self.registrations.get(key)
            rows.append(
                {
                    "topic": topic_name,
                    "partition_id": pid,
                    "consumer_id": reg.consumer_id if reg is not None else None,
                    "committed_offset": committed,
                    "inflight": self.registrations.inflight(key),
                    "max_offset": max_offset,
                    "lag": max(0, max_offset - committed) if max_offset >= 0 else 0,
                }
            )
        return rows
