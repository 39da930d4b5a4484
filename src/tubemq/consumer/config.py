"""Re-export of the consumer settings, which live in :mod:`tubemq.config` with the other configs."""

from __future__ import annotations

from ..config import CONSUME_FROM, MAX_FILTER_ITEM_LEN, MAX_FILTER_ITEMS, ConsumerConfig, normalize_topics

__all__ = ["CONSUME_FROM", "MAX_FILTER_ITEMS", "MAX_FILTER_ITEM_LEN", "ConsumerConfig", "normalize_topics"]
