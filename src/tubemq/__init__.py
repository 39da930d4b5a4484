"""tubemq: a fast, wire-compatible Python SDK for Apache InLong TubeMQ.

Public names are imported lazily so that ``import tubemq`` stays cheap and the codec can be used on
its own; type checkers see them through the ``TYPE_CHECKING`` imports below (real classes, not Any).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ._version import __version__

# a library never configures logging, but it must not print "No handlers could be found" either
logging.getLogger("tubemq").addHandler(logging.NullHandler())

if TYPE_CHECKING:
    from . import aio, codec, errors, serializers, server
    from .codec import BrokerInfo, Message, Partition
    from .config import ClientConfig, ConsumerConfig, ProducerConfig
    from .errors import TubeMQError
    from .sync.bound import BoundConsumer
    from .sync.consumer import Consumer
    from .sync.producer import Producer
    from .types import Batch, SendResult

_LAZY = {
    "Producer": "tubemq.sync.producer",
    "SendResult": "tubemq.types",
    "ProducerConfig": "tubemq.config",
    "ConsumerConfig": "tubemq.config",
    "ClientConfig": "tubemq.config",
    "Consumer": "tubemq.sync.consumer",
    "BoundConsumer": "tubemq.sync.bound",
    "Batch": "tubemq.types",
    "Message": "tubemq.codec",
    "Partition": "tubemq.codec",
    "BrokerInfo": "tubemq.codec",
    "TubeMQError": "tubemq.errors",
    "errors": "tubemq.errors",
    "codec": "tubemq.codec",
    "aio": "tubemq.aio",
    "server": "tubemq.server",
    "serializers": "tubemq.serializers",
}


def __getattr__(name: str) -> Any:
    from ._imports import load_lazy  # here, not at the top: `import tubemq.errors` loads nothing else

    return load_lazy("tubemq", _LAZY, globals(), name)


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_LAZY))


__all__ = [
    "BoundConsumer", "BrokerInfo", "Batch", "ClientConfig", "Consumer", "ConsumerConfig", "Message", "Partition",
    "Producer", "ProducerConfig", "SendResult", "TubeMQError", "__version__", "aio", "codec", "errors", "serializers",
    "server",
]
