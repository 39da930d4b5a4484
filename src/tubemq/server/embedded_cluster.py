"""``EmbeddedCluster``: the embedded server on a private daemon thread, for synchronous tests and scripts.

Every call into the server is marshalled onto the loop thread, so the server's state is only ever
touched from one thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from ..errors import TubeMQError
from .cluster import CALL_TIMEOUT_S, EmbeddedServer
from .config import ServerConfig
from .meta import TopicConf

log = logging.getLogger("tubemq.server.cluster")

T = TypeVar("T")


class EmbeddedCluster:
    """A whole TubeMQ cluster (one master, ``brokers`` brokers) on a private thread:
    ``with EmbeddedCluster(dir, brokers=3)``."""

    def __init__(
        self,
        data_dir: str | Path,
        master_port: int = 0,
        broker_port: int = 0,
        admin_port: int = 0,
        **options: Any,
    ) -> None:
        self.config = ServerConfig.from_kwargs(
            data_dir, master_port=master_port, broker_port=broker_port, admin_port=admin_port, **options
        )
        self._server = EmbeddedServer(self.config)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    # ---- lifecycle

    def __enter__(self) -> EmbeddedCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        if self._thread is not None:
            return
        loop = asyncio.new_event_loop()
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            loop.run_forever()

        thread = threading.Thread(target=run, name="tubemq-embedded-server", daemon=True)
        thread.start()
        ready.wait(CALL_TIMEOUT_S)
        self._loop = loop
        self._thread = thread
        try:
            self._run(self._server.start())
        except BaseException:
            self._shutdown_loop()
            raise

    def stop(self) -> None:
        if self._thread is None:
            return
        try:
            self._run(self._server.stop())
        finally:
            self._shutdown_loop()

    def _shutdown_loop(self) -> None:
        loop, thread = self._loop, self._thread
        self._loop = self._thread = None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(CALL_TIMEOUT_S)
        if not thread.is_alive():
            loop.close()

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._loop is None:
            coro.close()
            raise TubeMQError("the embedded cluster is not running")
        fut = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return fut.result(CALL_TIMEOUT_S)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise TubeMQError("the embedded cluster did not answer within 30 s") from None

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        async def call() -> Any:
            return fn(*args, **kwargs)

        return self._run(call())

    # ---- addresses

    @property
    def master_address(self) -> str:
        return self._server.master_address

    @property
    def broker_address(self) -> str:
        return self._server.broker_address

    @property
    def broker_addresses(self) -> list[str]:
        """``host:port`` of every broker of this cluster, in broker-id order."""
        return self._server.broker_addresses

    @property
    def admin_url(self) -> str:
        """Where this cluster's admin HTTP API answers (``/webapi.htm``)."""
        return self._server.admin_url

    @property
    def server(self) -> EmbeddedServer:
        """The async server object (use its attributes from the loop thread only)."""
        return self._server

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        return self._loop

    # ---- administration

    def create_topic(
        self, name: str, partitions: int = 3, stores: int = 1, max_msg_size: int | None = None, **kwargs: Any
    ) -> TopicConf:
        return self._call(self._server.create_topic, name, partitions, stores, max_msg_size, **kwargs)

    def delete_topic(self, name: str) -> bool:
        return self._call(self._server.delete_topic, name)

    def topics(self) -> list[TopicConf]:
        return self._call(self._server.topics)

    def group_offsets(self, group: str) -> list[dict[str, Any]]:
        return self._call(self._server.group_offsets, group)

    def set_standby(self, standby: bool) -> None:
        self._call(self._server.set_standby, standby)

    def advertise_broker(self, broker_id: int | None, address: str | None) -> None:
        """Advertise ``"host:port"`` to clients for this broker (None: its own listener again), so a
        test can put a proxy between clients and the broker (tubemq.testing.proxy_cluster)."""
        self._call(self._server.advertise_broker, broker_id, address)

    def stop_broker(self, broker_id: int | None = None) -> None:
        self._run(self._server.stop_broker(broker_id))

    def start_broker(self, broker_id: int | None = None) -> None:
        self._run(self._server.start_broker(broker_id))

    def restart_master(self) -> None:
        self._run(self._server.restart_master())

    def inject_fault(self, code: int, count: int = 1, min_limit_ms: int = 0, broker_id: int | None = None) -> None:
        """Test hook: the broker answers its next ``count`` sends with 419, or fetches with 452 (waiting
        ``min_limit_ms``) or 301 (see ``FaultInjector.inject``)."""
        self._call(self._server.node(broker_id).broker.faults.inject, code, count, min_limit_ms)

    def fault_log(self, broker_id: int | None = None) -> list[Any]:
        """What the injected faults met: ``FaultRecord`` (code, client, when, delay of its next call)."""
        return self._call(lambda: list(self._server.node(broker_id).broker.faults.log))
