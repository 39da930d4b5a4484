"""Running the embedded master + broker: ``EmbeddedServer`` (async) and the CLI's foreground run.

One asyncio event loop runs the master RPC listener, the broker RPC listener and the admin HTTP API.
``EmbeddedCluster`` (``embedded_cluster.py``) owns that loop on a private daemon thread so synchronous
tests and scripts can use it as a context manager.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import ssl
from collections.abc import Coroutine
from typing import Any, TypeVar

from .._tasks import cancel_and_wait
from ..errors import ConfigError, ServerBindError
from .admin import AdminApi, AdminServer, offset_history
from .admin.offsets import BrokerWebApi
from .broker import Broker
from .config import ServerConfig
from .dir_lock import DataDirLock
from .endpoints import Endpoints, publish, withdraw
from .master import Master
from .meta import BrokerEntry, MetaStore, TopicConf
from .registration import METHOD as REGISTRATION_METHOD
from .registration import STATUS_METHOD, BrokerRegistrar, BrokerTable
from .replication import POKE_METHOD, SYNC_METHOD, MasterReplication, ReplicatedAdminApi
from .rpc import RpcServer, frame_limit_for, rpc_options
from .storage.manager import StoreManager

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
    if config.tls_client_ca:  # mutual TLS: every client presents a certificate signed by this CA
        try:
            ctx.load_verify_locations(cafile=config.tls_client_ca)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError("tls_client_ca", f"cannot load the client CA bundle: {exc}") from exc
        ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


async def _listen(role: str, field: str, host: str, port: int, start: Coroutine[Any, Any, None]) -> None:
    """Run a listener's ``start()``; a failed bind becomes a ServerBindError naming role and port."""
    try:
        await start
    except OSError as exc:
        raise ServerBindError(role, field, host, port, exc) from exc


def frame_limit_of(config: ServerConfig, meta: MetaStore | None) -> int:
    """Largest request any deployed topic's messages can legally need (RpcServer's partial-frame bound)."""
    default = config.default_max_msg_size
    topics = meta.topics() if meta is not None else []
    return frame_limit_for(max((t.effective_max_msg_size(default) for t in topics), default=default))


class BrokerNode:
    """One broker: its stores, offsets, handlers and RPC listener (several may share a process)."""

    def __init__(self, config: ServerConfig, meta: MetaStore, ssl_ctx: ssl.SSLContext | None) -> None:
        self.config = config
        self.meta = meta
        self.ssl = ssl_ctx
        self.stores = StoreManager(config.data_dir, config.segment_bytes)
        self.broker = Broker(config, meta, self.stores)
        self.rpc: RpcServer | None = None
        self.port = config.broker_port
        #: (host, port) the master tells clients instead of the listener's own (a proxy in front)
        self.advertised: tuple[str, int] | None = None

    @property
    def broker_id(self) -> int:
        return self.config.broker_id

    @property
    def address(self) -> str:
        return f"{self.config.host}:{self.port}"

    def entry(self) -> BrokerEntry:
        host, port = self.advertised or (self.config.host, self.port)
        return BrokerEntry(self.broker_id, host, port, port if self.ssl is not None else None)

    async def start(self) -> None:
        await self.broker.start()
        await self.listen()

    async def listen(self) -> None:
        if self.rpc is not None:
            return
        cfg = self.config
        rpc = RpcServer(
            f"broker-{cfg.broker_id}",
            cfg.host,
            self.port,
            self.broker.handlers(),
            ssl=self.ssl,
            on_batch_end=self.broker.flush_pending,
            frame_limit=lambda: frame_limit_of(cfg, self.meta),
            **rpc_options(cfg),
        )
        await _listen("broker", "broker_port", cfg.host, self.port, rpc.start())
        self.rpc = rpc
        self.port = rpc.port

    async def close_listener(self) -> None:
        """The broker goes down: its listener closes, registrations are lost, data kept."""
        if self.rpc is None:
            return
        await self.rpc.stop()
        self.rpc = None
        self.broker.reset_sessions()

    async def stop(self) -> None:
        if self.rpc is not None:
            await self.rpc.stop()
            self.rpc = None
        await self.broker.stop()


def _node_configs(config: ServerConfig) -> list[ServerConfig]:
    """Per-broker configs: ids and ports counting up, one store directory each when there are several."""
    if config.brokers == 1:
        return [config]
    return [
        config.replace(
            broker_id=config.broker_id + i,
            broker_port=config.broker_port + i if config.broker_port else 0,
            data_dir=config.data_dir / f"broker-{config.broker_id + i}",
            brokers=1,
        )
        for i in range(config.brokers)
    ]


class EmbeddedServer:
    """Master + brokers + admin API inside the running event loop: ``async with EmbeddedServer(cfg)``.

    ``config.role`` decides what runs here: everything (``all``, with ``config.brokers`` brokers), the
    master and admin API only (``master``), or one broker that registers with a master elsewhere
    (``broker``, see server/registration.py).
    """

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.meta: MetaStore | None = None
        self.nodes: list[BrokerNode] = []
        self.master: Master | None = None
        self.admin: AdminServer[AdminApi] | None = None
        self.registrar: BrokerRegistrar | None = None
        #: a master's side of the active/standby pair (server/replication.py)
        self.replication: MasterReplication | None = None
        self._start_standby = bool(config.standby)
        self._master_rpc: RpcServer | None = None
        #: the broker processes that report here (role ``master``), and the topic version each loaded
        self._broker_table: BrokerTable | None = None
        self._ssl: ssl.SSLContext | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.master_port = config.master_port
        self.admin_port = config.admin_port
        self.started = False
        #: held from start to stop: one server per data directory (server/dir_lock.py)
        self._dir_lock: DataDirLock | None = None

    # ---- the first broker (the single-broker API)

    @property
    def broker(self) -> Broker | None:
        return self.nodes[0].broker if self.nodes else None

    @property
    def stores(self) -> StoreManager | None:
        return self.nodes[0].stores if self.nodes else None

    @property
    def broker_port(self) -> int:
        return self.nodes[0].port if self.nodes else self.config.broker_port

    def node(self, broker_id: int | None = None) -> BrokerNode:
        """The broker with this id (default: the first one)."""
        for n in self.nodes:
            if broker_id is None or n.broker_id == broker_id:
                return n
        raise ConfigError("broker_id", f"no broker {broker_id} runs in this server")

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
        self._dir_lock = DataDirLock.acquire(cfg.data_dir)
        try:
            self.meta = MetaStore(cfg.data_dir)
            if cfg.role != "master":
                for node_cfg in _node_configs(cfg):
                    node = BrokerNode(node_cfg, self.meta, self._ssl)
                    self.nodes.append(node)
                    await node.start()
                    if cfg.role == "all":
                        self.meta.set_broker(node.entry())
            if cfg.role == "broker":
                await self._start_registrar()
            else:
                await self._start_master_and_admin()
        except BaseException:
            await self.stop()
            raise
        self.started = True

    async def stop(self) -> None:
        tasks, self._tasks = self._tasks, []
        await cancel_and_wait(tasks)
        if self.admin is not None:
            await self.admin.stop()
            self.admin = None
        await self._stop_master()
        nodes, self.nodes = self.nodes, []
        for node in nodes:
            await node.stop()
        if self._dir_lock is not None:
            self._dir_lock.release()
            self._dir_lock = None
        self.started = False

    async def _start_master_and_admin(self) -> None:
        cfg = self.config
        assert self.meta is not None
        rep = self.replication = MasterReplication(cfg, self.meta, self)
        if cfg.peer_master and not cfg.standby and await rep.initial_standby():
            self._start_standby = True  # the peer is active: join it as its standby
        if not self._start_standby:
            self.meta.set_authoritative()  # an active master's store is the cluster's metadata
        await self._start_master()
        api: AdminApi = ReplicatedAdminApi(
            cfg,
            self.meta,
            self.master,
            self.broker,
            create_topic=self.create_topic,
            delete_topic=self.delete_topic,
            standby=self._is_standby,
            active_admin_url=rep.peer_admin_url,
        )
        table = self._broker_table = BrokerTable(
            self.meta, self._broker_seen, self._is_standby, self._is_online, lambda: {"masters": rep.masters()}
        )
        api.extra_methods[("op_modify", REGISTRATION_METHOD)] = table.heartbeat
        api.extra_methods[("op_query", STATUS_METHOD)] = table.status
        api.extra_methods[("op_modify", SYNC_METHOD)] = rep.sync
        api.extra_methods[("op_modify", POKE_METHOD)] = rep.poke
        broker_web = BrokerWebApi(lambda: self.nodes, time_lookup=cfg.time_lookup)
        api.extra_methods.update(broker_web.methods())
        api.broker_web_port = broker_web.web_port_of(lambda: self.admin_port)
        history = offset_history.run(lambda: self.nodes, broker_web.histories)
        self._tasks.append(asyncio.create_task(history, name="tubemq-offset-history"))
        self.admin = AdminServer(api, cfg.host, self.admin_port)
        await _listen("admin", "admin_port", cfg.host, self.admin_port, self.admin.start())
        self.admin_port = self.admin.port
        if cfg.role == "master":  # with a configured peer, or one learned from its calls
            self._tasks.append(asyncio.create_task(rep.run(), name="tubemq-master-replication"))
            self._tasks.append(asyncio.create_task(rep.fence.run(), name="tubemq-master-fence"))

    def _broker_seen(self, entry: BrokerEntry) -> None:
        if self.master is not None:
            self.master.broker_seen(entry)

    def _deployed_on(self, broker_id: int, topic: str) -> bool:
        return self._broker_table is None or self._broker_table.deployed(broker_id, topic)

    def _is_standby(self) -> bool:
        rep = self.replication
        return self.master is None or self.master.standby or (rep is not None and rep.fenced())

    def _is_online(self, broker_id: int) -> bool:
        return self.master is not None and self.master.broker_online(broker_id)

    async def _start_registrar(self) -> None:
        cfg = self.config
        assert self.meta is not None and cfg.master_admin_url
        self.registrar = BrokerRegistrar(cfg, self.nodes[0].entry, self.meta)
        await self.registrar.beat_once()  # a reachable master knows us before start() returns
        self._tasks.append(asyncio.create_task(self.registrar.run(), name="tubemq-broker-registration"))

    async def _start_master(self) -> None:
        assert self.meta is not None
        cfg = self.config
        master = Master(cfg, self.meta, self.broker)
        master.topology.deployed_on = self._deployed_on
        if self._start_standby:
            master.standby = True
        if cfg.role == "master" and self.replication is not None:
            master.fenced = self.replication.fenced
        self.master = master
        for node in self.nodes:
            node.broker.visit_token_check = master.tokens.is_valid if cfg.visit_token_check else None
        await master.start()
        rpc = RpcServer(
            "master",
            cfg.host,
            self.master_port,
            master.handlers(),
            ssl=self._ssl,
            frame_limit=lambda: frame_limit_of(cfg, self.meta),
            **rpc_options(cfg),
        )
        await _listen("master", "master_port", cfg.host, self.master_port, rpc.start())
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
    def broker_addresses(self) -> list[str]:
        return [n.address for n in self.nodes]

    @property
    def admin_url(self) -> str:
        return f"http://{self.config.host}:{self.admin_port}/webapi.htm"

    @property
    def admin_api(self) -> AdminApi | None:
        """The running admin API (None before it starts and after it stops)."""
        return self.admin.api if self.admin is not None else None

    def endpoints(self) -> Endpoints:
        """This server's addresses, as ``tubemq serve`` publishes them (server/endpoints.py)."""
        return Endpoints(
            self.master_address, self.admin_url, self.broker_addresses, os.getpid(), str(self.config.data_dir)
        )

    # ---- administration (loop thread)

    def create_topic(
        self, name: str, partitions: int = 3, stores: int = 1, max_msg_size: int | None = None, **kwargs: Any
    ) -> TopicConf:
        """Deploy a topic (``^[a-zA-Z]\\w+$``, partitions per store, store count; ``broker_ids`` = the
        brokers it is deployed on, default all)."""
        assert self.meta is not None
        ids = kwargs.get("broker_ids")
        if isinstance(ids, list):  # brokers of this process or registered broker processes
            unknown = sorted(set(ids) - set(self.meta.brokers))
            if unknown:
                raise ConfigError("broker_ids", f"no broker {unknown} in this cluster")
        conf = self.meta.create_topic(name, partitions, stores, max_msg_size, **kwargs)
        for node in self.nodes:
            if conf.on_broker(node.broker_id):
                for index in range(conf.num_stores):
                    node.stores.get(conf.name, index)
        return conf

    def delete_topic(self, name: str) -> bool:
        """Remove a topic and its data; False when it did not exist."""
        assert self.meta is not None
        return self.meta.delete_topic(name)

    def topics(self) -> list[TopicConf]:
        assert self.meta is not None
        return self.meta.topics()

    def group_offsets(self, group: str) -> list[dict[str, Any]]:
        """Per broker, topic and partition of this process: owner, committed offset, max offset, lag."""
        return [{"broker_id": n.broker_id, **row} for n in self.nodes for row in n.broker.views.group_detail(group)]

    def set_standby(self, standby: bool) -> None:
        assert self.master is not None
        self.master.standby = standby

    async def stop_broker(self, broker_id: int | None = None) -> None:
        """Simulate a broker going down (default: the first): its listener closes; registrations are
        lost, data kept; the master takes its partitions offline."""
        node = self.node(broker_id)
        await node.close_listener()
        if self.master is not None:
            self.master.set_broker_online(node.broker_id, False)

    def advertise_broker(self, broker_id: int | None, address: str | None) -> None:
        """Tell clients ``"host:port"`` for this broker (e.g. a fault proxy in front of it) instead of
        its listener's address; None advertises the listener again. Clients learn it with their next
        master heartbeat (the broker list's checksum changes)."""
        node = self.node(broker_id)
        if address is None:
            node.advertised = None
        else:
            host, sep, port = address.rpartition(":")
            if not sep or not host or not port.isdigit() or not 0 < int(port) <= 65535:
                raise ConfigError("address", f"must be HOST:PORT, got {address!r}")
            node.advertised = (host, int(port))
        if self.meta is not None and self.config.role == "all":
            self.meta.set_broker(node.entry())  # a broker process sends entry() with its next beat

    async def start_broker(self, broker_id: int | None = None) -> None:
        """Bring the broker back on the same port."""
        node = self.node(broker_id)
        await node.listen()
        if self.master is not None:
            self.master.meta.set_broker(node.entry())
            self.master.set_broker_online(node.broker_id, True)

    async def restart_master(self) -> None:
        """Restart the master on the same port: its sessions and balance state are lost, topics kept."""
        await self._stop_master()
        await self._start_master()


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
            if server.master is not None:
                log.info("master listening on %s", server.master_address)
            for node in server.nodes:
                log.info("broker %d listening on %s", node.broker_id, node.address)
            if server.admin is not None:
                log.info("admin API at %s", server.admin_url)
            published = publish(server.endpoints()) if server.master is not None else None
            try:
                await stop.wait()
                log.info("shutting down")
            finally:
                withdraw(published)

    asyncio.run(main())
    return 0
