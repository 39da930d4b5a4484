"""Running the embedded master + broker: ``EmbeddedServer`` (async), ``EmbeddedCluster`` (thread), CLI.

One asyncio event loop runs the master RPC listener, the broker RPC listener and the admin HTTP API.
``EmbeddedCluster`` owns that loop on a private daemon thread so synchronous tests and scripts can use
it as a context manager; every call into the server is marshalled onto the loop thread, so the
server's state is only ever touched from one thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import signal
import ssl
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from ..errors import ConfigError, TubeMQError
from .admin import AdminApi, AdminServer
from .broker import Broker
from .config import ServerConfig
from .endpoints import Endpoints, publish, withdraw
from .master import Master
from .meta import BrokerEntry, MetaStore, TopicConf
from .rpc import RpcServer
from .storage import StoreManager

log = logging.getLogger("tubemq.server.cluster")

T = TypeVar("T")
CALL_TIMEOUT_S = 30.0


def _ssl_context(config: ServerConfig) -> ssl.SSLContext | None:
    if not config.tls_cert:
        return None
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        ctx.load_cert_chain(config.tls_cert, config.tls_key)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError("tls_cert", f"cannot load certificate/key: {exc}") from exc
    return ctx


class EmbeddedServer:
    """Master + broker + admin API inside the running event loop: ``async with EmbeddedServer(cfg)``."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.meta: MetaStore | None = None
        self.stores: StoreManager | None = None
        self.broker: Broker | None = None
        self.master: Master | None = None
        self.admin: AdminServer | None = None
        self._broker_rpc: RpcServer | None = None
        self._master_rpc: RpcServer | None = None
        self._ssl: ssl.SSLContext | None = None
        self.master_port = config.master_port
        self.broker_port = config.broker_port
        self.admin_port = config.admin_port
        self.started = False

    # ---- lifecycle

    async def __aenter__(self) -> EmbeddedServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> None:
        if self.started:
            return
        cfg = self.config
        self._ssl = _ssl_context(cfg)
        self.meta = MetaStore(cfg.data_dir)
        self.stores = StoreManager(cfg.data_dir, cfg.segment_bytes)
        self.broker = Broker(cfg, self.meta, self.stores)
        try:
            await self.broker.start()
            await self._start_broker_rpc()
            await self._start_master()
            api = AdminApi(
                cfg, self.meta, self.master, self.broker, create_topic=self.create_topic, delete_topic=self.delete_topic
            )
            self.admin = AdminServer(api, cfg.host, self.admin_port)
            await self.admin.start()
            self.admin_port = self.admin.port
        except BaseException:
            await self.stop()
            raise
        self.started = True

    async def stop(self) -> None:
        if self.admin is not None:
            await self.admin.stop()
            self.admin = None
        await self._stop_master()
        if self._broker_rpc is not None:
            await self._broker_rpc.stop()
            self._broker_rpc = None
        if self.broker is not None:
            await self.broker.stop()
            self.broker = None
        self.started = False

    async def _start_broker_rpc(self) -> None:
        assert self.broker is not None and self.meta is not None
        cfg = self.config
        rpc = RpcServer(
            "broker",
            cfg.host,
            self.broker_port,
            self.broker.handlers(),
            ssl=self._ssl,
            max_connections=cfg.max_connections,
            max_inflight_per_connection=cfg.max_inflight_per_connection,
            max_buffered_bytes_per_connection=cfg.max_buffered_bytes_per_connection,
            on_batch_end=self.broker.flush_pending,
        )
        await rpc.start()
        self._broker_rpc = rpc
        self.broker_port = rpc.port
        tls_port = rpc.port if self._ssl is not None else None
        self.meta.set_broker(BrokerEntry(cfg.broker_id, cfg.host, rpc.port, tls_port))

    async def _start_master(self) -> None:
        assert self.meta is not None and self.broker is not None
        cfg = self.config
        master = Master(cfg, self.meta, self.broker)
        self.master = master
        self.broker.visit_token_check = master.tokens.is_valid if cfg.visit_token_check else None
        await master.start()
        rpc = RpcServer(
            "master",
            cfg.host,
            self.master_port,
            master.handlers(),
            ssl=self._ssl,
            max_connections=cfg.max_connections,
            max_inflight_per_connection=cfg.max_inflight_per_connection,
            max_buffered_bytes_per_connection=cfg.max_buffered_bytes_per_connection,
        )
        await rpc.start()
        self._master_rpc = rpc
        self.master_port = rpc.port
        if self.admin is not None:
            self.admin.api.master = master

    async def _stop_master(self) -> None:
        if self._master_rpc is not None:
            await self._master_rpc.stop()
            self._master_rpc = None
        if self.master is not None:
            await self.master.stop()
            self.master = None

    # ---- addresses

    @property
    def master_address(self) -> str:
        return f"{self.config.host}:{self.master_port}"

    @property
    def broker_address(self) -> str:
        return f"{self.config.host}:{self.broker_port}"

    @property
    def admin_url(self) -> str:
        return f"http://{self.config.host}:{self.admin_port}/webapi.htm"

    def endpoints(self) -> Endpoints:
        """This server's addresses, as ``tubemq serve`` publishes them (server/endpoints.py)."""
        return Endpoints(
            self.master_address, self.admin_url, [self.broker_address], os.getpid(), str(self.config.data_dir)
        )

    # ---- administration (loop thread)

    def create_topic(
        self, name: str, partitions: int = 3, stores: int = 1, max_msg_size: int | None = None, **kwargs: Any
    ) -> TopicConf:
        """Deploy a topic on the broker (``^[a-zA-Z]\\w+$``, partitions per store, store count)."""
        assert self.meta is not None and self.stores is not None
        conf = self.meta.create_topic(name, partitions, stores, max_msg_size, **kwargs)
        for index in range(conf.num_stores):
            self.stores.get(conf.name, index)
        return conf

    def delete_topic(self, name: str) -> bool:
        """Remove a topic and its data; False when it did not exist."""
        assert self.meta is not None
        return self.meta.delete_topic(name)

    def topics(self) -> list[TopicConf]:
        assert self.meta is not None
        return self.meta.topics()

    def group_offsets(self, group: str) -> list[dict[str, Any]]:
        assert self.broker is not None
        return self.broker.group_detail(group)

    def set_standby(self, standby: bool) -> None:
        assert self.master is not None
        self.master.standby = standby

    async def stop_broker(self) -> None:
        """Simulate the broker going down: its listener closes; registrations are lost, data kept."""
        if self._broker_rpc is None:
            return
        await self._broker_rpc.stop()
        self._broker_rpc = None
        assert self.broker is not None
        self.broker.reset_sessions()
        if self.master is not None:
            self.master.set_broker_online(self.config.broker_id, False)

    async def start_broker(self) -> None:
        """Bring the broker back on the same port."""
        if self._broker_rpc is not None:
            return
        await self._start_broker_rpc()
        if self.master is not None:
            self.master.set_broker_online(self.config.broker_id, True)

    async def restart_master(self) -> None:
        """Restart the master on the same port: its sessions and balance state are lost, topics kept."""
        await self._stop_master()
        await self._start_master()


class EmbeddedCluster:
    """A whole TubeMQ cluster (one master, one broker) on a private thread: ``with EmbeddedCluster(dir)``."""

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
    def admin_url(self) -> str:
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

    def stop_broker(self) -> None:
        self._run(self._server.stop_broker())

    def start_broker(self) -> None:
        self._run(self._server.start_broker())

    def restart_master(self) -> None:
        self._run(self._server.restart_master())


def run_foreground(config: ServerConfig) -> int:
    """``tubemq serve``: run until SIGINT/SIGTERM, then shut down cleanly; returns the exit code."""

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, stop.set)
            except (NotImplementedError, RuntimeError):  # pragma: no cover - non-main thread / Windows
                pass
        async with EmbeddedServer(config) as server:
            log.info("master listening on %s", server.master_address)
            log.info("broker %d listening on %s", config.broker_id, server.broker_address)
            log.info("admin API at %s", server.admin_url)
            published = publish(server.endpoints())
            try:
                await stop.wait()
                log.info("shutting down")
            finally:
                withdraw(published)

    asyncio.run(main())
    return 0
