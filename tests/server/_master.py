"""The master's handlers without sockets: one master on one broker, and the RPC context a call carries."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tubemq.server.config import ServerConfig
from tubemq.server.master import Master
from tubemq.server.meta import BrokerEntry, MetaStore
from tubemq.server.rpc import RpcContext


def ctx(method: int = 1, tls: bool = False) -> RpcContext:
    """What an RPC from 127.0.0.1:50000 to the master port carries (serial 1, protocol version 3)."""
    return RpcContext(1, 1, 3, method, 10000, "127.0.0.1:50000", 8715, tls, time.monotonic())


def master_with(data_dir: Path, topics: dict[str, dict[str, Any]]) -> Master:
    """A master in ``data_dir`` that knows broker 1 (127.0.0.1:8123) and ``topics`` (name -> create_topic
    arguments); balance rounds every 200 ms, none before the handlers ask for one."""
    cfg = ServerConfig(data_dir=data_dir, balance_period_ms=200, first_balance_delay_ms=-1)
    meta = MetaStore(data_dir)
    meta.set_broker(BrokerEntry(1, "127.0.0.1", 8123, 8124))
    for name, options in topics.items():
        meta.create_topic(name, **options)
    return Master(cfg, meta)
