"""What this broker serves: the topics deployed on it and the store of each partition.

A broker knows only its own deployments (``TopicConf.on_broker``), and a partition id names its store
by ``id // 10000`` and its partition by ``id % 10000`` (docs/PROTOCOL.md §5.3). Every handler and the
admin views resolve a request's topic and partition here, so they agree on what exists.
"""

from __future__ import annotations

from ...protocol import constants as C
from ..meta import MetaStore, TopicConf
from ..storage import MessageStore
from ..storage.manager import StoreManager

_MAX_STORE_INDEX = 100  # guard against hostile ids creating thousands of store directories


class Catalog:
    """Topics deployed on one broker and their partitions' stores."""

    def __init__(self, meta: MetaStore, stores: StoreManager, broker_id: int) -> None:
        self.meta = meta
        self.stores = stores
        self.broker_id = broker_id

    def topic(self, name: str) -> TopicConf | None:
        """The topic if it is deployed on this broker."""
        topic = self.meta.get(name)
        return topic if topic is not None and topic.on_broker(self.broker_id) else None

    def topics(self) -> list[TopicConf]:
        return [t for t in self.meta.topics() if t.on_broker(self.broker_id)]

    def store_for(self, topic: TopicConf, partition_id: int) -> MessageStore | None:
        """The store holding ``partition_id`` of ``topic`` (opened on first use), None if it has none."""
        if partition_id < 0 or partition_id % C.META_STORE_INS_BASE >= topic.num_partitions:
            return None
        index = partition_id // C.META_STORE_INS_BASE
        if index >= max(topic.num_stores, _MAX_STORE_INDEX):
            return None
        return self.stores.get(topic.name, index)
