"""Partition choice for a send: round-robin (Java default), key hash, or a user partitioner.

Round-robin follows the Java ``RoundRobinPartitionRouter``: a per-topic counter starting at a random
value, skipping partitions on brokers the quality tracker currently shields; when every broker is
shielded all partitions are used (sending somewhere beats failing locally). Key routing hashes the
key with CRC-32 (stable across processes and machines, unlike ``hash()``) over the topic's
partitions sorted by (broker, partition id), and ignores shielding so one key stays on one partition.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable, Collection, Sequence
from typing import Any

from .. import codec
from ..errors import ConfigError, TopicNotPublishedError

Partitioner = Callable[[str, Any, Sequence[codec.Partition]], "codec.Partition | int"]


def key_bytes(key: Any) -> bytes:
    if isinstance(key, bytes):
        return key
    if isinstance(key, (bytearray, memoryview)):
        return bytes(key)
    if isinstance(key, str):
        return key.encode("utf-8")
    if isinstance(key, int) and not isinstance(key, bool):
        return str(key).encode()
    raise TypeError(f"key must be str, bytes or int, not {type(key).__name__}")


def key_index(key: Any, count: int) -> int:
    """The index a key maps to among ``count`` partitions in a stable order."""
    return zlib.crc32(key_bytes(key)) % count


def key_partition(key: Any, partitions: Sequence[codec.Partition]) -> codec.Partition:
    """The partition a key maps to (partitions must be in a stable order)."""
    return partitions[key_index(key, len(partitions))]


class Router:
    """Chooses a partition per message; see the module docstring."""

    def __init__(self, partitioner: str | Partitioner = "round_robin") -> None:
        if not callable(partitioner) and partitioner not in ("round_robin", "key_hash"):
            raise ConfigError("partitioner", "must be 'round_robin', 'key_hash' or a callable")
        self.partitioner = partitioner
        # round-robin steps come from the loop thread and from blocking senders' threads without a
        # lock: each dict read and write is atomic (also free-threaded); two concurrent steps may pick
        # the same partition (a lost step), which changes the spread, never the correctness
        self._counters: dict[str, int] = {}

    def start_for(self, topic: str) -> int:
        """Where a blocking thread's own round-robin over ``topic`` starts (its first send takes the
        next partition): the topic's shared counter, moved one step on so that the next thread, or
        the loop's next send, takes the partition after it."""
        n = self._counters.get(topic)
        if n is None:
            n = random.randrange(1 << 30)
        self._counters[topic] = n + 1
        return n

    def choose(
        self,
        topic: str,
        partitions: Sequence[codec.Partition],
        key: Any = None,
        excluded_brokers: Collection[int] = (),
    ) -> codec.Partition:
        if not partitions:
            raise TopicNotPublishedError(444, f"topic {topic!r} has no partition available")
        p = self.partitioner
        if callable(p):
            chosen = p(topic, key, partitions)
            if isinstance(chosen, int) and not isinstance(chosen, bool):
                if not 0 <= chosen < len(partitions):
                    raise TopicNotPublishedError(444, f"partitioner returned index {chosen} of {len(partitions)}")
                return partitions[chosen]
            if chosen not in partitions:
                raise TopicNotPublishedError(444, f"partitioner returned {chosen!r}, not a partition of {topic!r}")
            return chosen  # type: ignore[return-value]
        if key is not None:  # "key_hash" and "round_robin" both hash a given key
            return key_partition(key, partitions)
        size = len(partitions)
        n = self._counters.get(topic)
        if n is None:
            n = random.randrange(1 << 30)
        if excluded_brokers:
            for _ in range(size):
                n += 1
                cand = partitions[n % size]
                if cand.broker_id not in excluded_brokers:
                    self._counters[topic] = n
                    return cand
        n += 1
        self._counters[topic] = n
        return partitions[n % size]


__all__ = ["Partitioner", "Router", "key_bytes", "key_index", "key_partition"]
