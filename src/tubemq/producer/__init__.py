"""The producer: ``Producer`` (sync/threaded), ``tubemq.aio.Producer`` (asyncio), ``SendResult``."""

from __future__ import annotations

from .core import SendResult
from .sync import Producer

__all__ = ["Producer", "SendResult"]
