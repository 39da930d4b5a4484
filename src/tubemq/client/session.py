"""Shared machinery of a client's session with the master (docs/PROTOCOL.md §5.0, §5.1, §5.2, §8).

:class:`MasterSessionBase` owns what producer and consumer sessions have in common: the connection
pool and master fail-over invoker, registration with retries and back-off, the periodic heartbeat
task, re-registration when the master forgets the client (411, StandbyException, a new master),
visit/auth token storage, the broker map with its checksum, the approved client config, periodic
stats reporting and a clean close after which no heartbeat is ever sent.

Subclasses implement three coroutines: :meth:`_register_once`, :meth:`_heartbeat_once` and
:meth:`_close_once` (request/response specifics), and may override :meth:`should_heartbeat`.
They raise :class:`~tubemq.errors.ServerError` (via :meth:`check`) for ``success = false`` answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import platform
import time
from collections.abc import Iterable
from typing import Any

from .. import codec
from .._tasks import wait_for
from ..config import HEARTBEAT_FAIL_WAIT_MS, ClientConfig
from ..errors import (
    AuthenticationError,
    ClientClosedError,
    DecodeError,
    NotRegisteredError,
    NotTubeMQPortError,
    ServerError,
    StandbyError,
    TubeMQError,
    error_for_code,
)
from ..metrics import Metrics
from ..net.invoker import MasterInvoker
from ..net.pool import ConnectionPool, PoolSettings, jittered
from ..protocol import master_pb
from ..protocol.constants import (
    DEFAULT_BROKER_PORT,
    DEFAULT_BROKER_TLS_PORT,
    DEFAULT_MAX_MSG_SIZE,
    MAX_HEARTBEAT_RETRY_TIMES,
    MAX_MAX_MSG_SIZE,
    META_VALUE_UNDEFINED,
    MIN_MAX_MSG_SIZE,
)
from . import auth
from .identity import local_ip

log = logging.getLogger("tubemq.client.session")

#: After this long without a broker-list change the heartbeat sends checksum -1 (Java: 2 h).
BROKER_FORCED_REFRESH_S = 2 * 3600.0
#: Cap of the growing wait between background re-register attempts after RPC failures.
REGISTER_WAIT_CAP_S = 10.0
#: Python runtime, reported in jdkVersion like the Java client reports its JVM (logged only).
RUNTIME_VERSION = f"{platform.python_implementation()} {platform.python_version()}"


class MasterSessionBase:
    """Register / heartbeat / close with fail-over; see the module docstring."""

    #: Register refusals (``success=false`` codes) that end the start-up registration at once, with the
    #: typed error and the master's message; every other refusal is retried, as the Java client does
    #: (docs/guide/errors.md, "Refused registration"). None for producers: Java's
    #: ProducerManager.register2Master retries every code.
    fatal_register_codes: frozenset[int] = frozenset()
    #: Refusals that a retry cannot fix without a configuration change: the background re-registration
    #: (registering forever after the master forgot the client) stops at these and waits a heartbeat
    #: period instead of asking again every ``register_retry_wait_ms``. Includes fatal_register_codes.
    config_register_codes: frozenset[int] = frozenset()
    #: Whether a refused start-up registration waits ``register_retry_wait_ms`` before the next attempt
    #: (Java producer and client-balance consumer: 1 s; the Java server-balanced consumer retries at once).
    wait_after_refusal: bool = True
    role = "client"
    #: Seconds from a successful start (register) to the first periodic heartbeat when heartbeats are
    #: wanted already (:meth:`should_heartbeat`). Java consumers schedule their master heartbeat with
    #: initial delay 0 right after registering (captures s2/s3/s4: first heartbeat 20-40 ms after the
    #: register answer, then every period; s5 the same for client-balance consumers).
    initial_heartbeat_delay: float = 0.0
    #: When heartbeats are not wanted at start (a producer before its first publish), the periodic
    #: timer starts at the first :meth:`heartbeat_now` (the publish heartbeat) and fires this many
    #: seconds after it, then every period: the Java producer schedules its heartbeat task with 5 ms
    #: initial delay once the first publish's heartbeat is done (capture s1: publish heartbeat, first
    #: periodic one 18 ms later, then 13 s apart). Until then no periodic heartbeat is sent.
    deferred_heartbeat_delay: float = 0.005

    def __init__(
        self,
        config: ClientConfig,
        client_id: str,
        *,
        pool: ConnectionPool | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.config = config
        self.client_id = client_id
        self.host_name = config.local_address or local_ip()
        self.metrics = metrics or Metrics()
        self.visit_token: int = META_VALUE_UNDEFINED
        self.auth_token: str = ""  # last non-blank MasterAuthorizedInfo.authAuthorizedToken
        self.require_auth = False
        self.brokers: dict[int, codec.BrokerInfo] = {}
        self.broker_checksum: int = -1
        self.broker_updated_at = time.monotonic()
        self.config_id: int = META_VALUE_UNDEFINED
        self.max_msg_size: int = DEFAULT_MAX_MSG_SIZE
        self.default_broker_port = DEFAULT_BROKER_TLS_PORT if config.tls else DEFAULT_BROKER_PORT
        self.registered = False
        self.closed = False
        self.last_error: BaseException | None = None
        self.heartbeats_sent = 0
        self.registrations = 0
        self._pool = pool
        self._own_pool = pool is None
        self.invoker: MasterInvoker | None = None
        self._rpc_lock: asyncio.Lock | None = None
        self._wake: asyncio.Event | None = None
        self._hb_armed: asyncio.Event | None = None  # set by heartbeat_now(): the deferred timer may start
        self._hb_task: asyncio.Task[None] | None = None
        self._stats_task: asyncio.Task[None] | None = None
        self._hb_failures = 0

    # ------------------------------------------------------------------ lifecycle

    @property
    def pool(self) -> ConnectionPool:
        if self._pool is None:
            raise ClientClosedError("session not started")
        return self._pool

    async def start(self, *, register_attempts: int | None = 5) -> None:
        """Open the pool, register (``register_attempts`` tries, None = forever), start the timers."""
        if self.closed:
            raise ClientClosedError(f"{self.role} is closed")
        if self._pool is None:
            settings = PoolSettings(
                ssl=self.config.ssl_context(),
                connect_timeout=self.config.connect_timeout_ms / 1000.0,
                max_inflight=self.config.max_inflight,
            )
            if self.config.pool == "shared" and settings.ssl is None:
                self._pool = ConnectionPool.acquire_shared(settings)
            else:
                self._pool = ConnectionPool(settings)
        self.invoker = MasterInvoker(self.config.masters, self._pool, timeout_ms=self.config.rpc_timeout_ms)
        self._rpc_lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._hb_armed = asyncio.Event()
        try:
            await self.register(max_attempts=register_attempts)
        except BaseException:
            await self._release_pool()
            raise
        self._hb_task = asyncio.get_running_loop().create_task(self._heartbeat_loop())
        if self.config.stats_interval_ms > 0 and self.config.stats_callback is not None:
            self._stats_task = asyncio.get_running_loop().create_task(self._stats_loop())

    async def close(self, *, timeout: float | None = None) -> None:
        """Stop the heartbeat (none is sent after this returns), send the close request once."""
        if self.closed:
            return
        self.closed = True
        for task in (self._hb_task, self._stats_task):
            if task is not None:
                task.cancel()
        for task in (self._hb_task, self._stats_task):
            if task is not None:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        self._hb_task = self._stats_task = None
        if self.registered and self.invoker is not None:
            wait = timeout if timeout is not None else self.config.rpc_timeout_ms / 1000.0
            try:
                assert self._rpc_lock is not None
                async with self._rpc_lock:
                    await wait_for(self._close_once(), wait)
            except (TubeMQError, asyncio.TimeoutError) as exc:
                log.info("%s %s: close request failed (ignored): %s", self.role, self.client_id, exc)
        self.registered = False
        await self._release_pool()

    async def _release_pool(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            if self._own_pool:
                await pool.close()

    # ------------------------------------------------------------------ register

    async def register(self, *, max_attempts: int | None = None) -> None:
        """Register until it works: ``success=false`` waits ``register_retry_wait_ms`` (at start-up not
        when ``wait_after_refusal`` is off), RPC failures wait longer (growing, capped); fatal codes
        (``config_register_codes`` when registering forever) and the last of ``max_attempts`` raise."""
        attempt = 0
        # Java waits 1000 ms after success=false and 1200 ms after an RPC failure; when registering
        # forever in the background, the RPC-failure wait grows (capped) to spare a dead master list.
        exc_wait = self.config.register_retry_wait_ms * 1.2 / 1000.0
        while True:
            if self.closed:
                raise ClientClosedError(f"{self.role} is closed")
            attempt += 1
            try:
                assert self._rpc_lock is not None
                async with self._rpc_lock:
                    if self.closed:
                        raise ClientClosedError(f"{self.role} is closed")
                    await self._register_once()
                self.registered = True
                self.registrations += 1
                self.last_error = None
                self._hb_failures = 0
                self.metrics.inc("master.registrations")
                log.info("%s %s registered with master %s", self.role, self.client_id, self.current_master)
                return
            except ServerError as exc:
                self.last_error = exc
                fatal = self.config_register_codes if max_attempts is None else self.fatal_register_codes
                if exc.code in fatal or (max_attempts is not None and attempt >= max_attempts):
                    raise
                log.warning("%s register refused (attempt %d): %s", self.role, attempt, exc)
                if max_attempts is None or self.wait_after_refusal:
                    wait = self.config.register_retry_wait_ms / 1000.0
                else:
                    wait = 0.0
            except (TubeMQError, DecodeError) as exc:
                if isinstance(exc, (ClientClosedError, NotTubeMQPortError)):
                    raise  # closed, or the address is not a TubeMQ port: retrying cannot help
                self.last_error = exc
                if max_attempts is not None and attempt >= max_attempts:
                    raise
                log.warning("%s register failed (attempt %d): %s", self.role, attempt, exc)
                wait = exc_wait
                if max_attempts is None:
                    exc_wait = min(REGISTER_WAIT_CAP_S, exc_wait * 1.5)
            self.metrics.inc("master.register_failures")
            await self._sleep(jittered(wait))  # many clients refused together do not retry together

    # ------------------------------------------------------------------ heartbeat

    def should_heartbeat(self) -> bool:
        """Producers skip heartbeats while nothing is published (Java); consumers always send."""
        return True

    def trigger_heartbeat(self) -> None:
        """Wake the heartbeat task now (e.g. after a connection drop)."""
        if self._wake is not None:
            self._wake.set()

    async def heartbeat_now(self) -> None:
        """One heartbeat right now (publish needs the metadata synchronously); errors propagate."""
        if self.closed:
            raise ClientClosedError(f"{self.role} is closed")
        try:
            await self._heartbeat_now()
        finally:
            # like the Java producer's publish (`finally`: start the heartbeat task once), whatever
            # this heartbeat's outcome
            if self._hb_armed is not None:
                self._hb_armed.set()

    async def _heartbeat_now(self) -> None:
        try:
            await self._locked_heartbeat()
        except AuthenticationError:
            # our authorized token was refused: authenticate in full and retry once (§8.2)
            self.require_auth = True
            await self._locked_heartbeat()
        except (NotRegisteredError, StandbyError):
            # the master forgot us (411) or is a standby now: register (next master) and retry once
            self.registered = False
            self.on_reregister()
            await self.register(max_attempts=3)
            await self._locked_heartbeat()

    async def _locked_heartbeat(self) -> None:
        assert self._rpc_lock is not None
        async with self._rpc_lock:
            if self.closed:  # never a heartbeat after close
                raise ClientClosedError(f"{self.role} is closed")
            self.heartbeats_sent += 1
            await self._heartbeat_once()
        self._hb_failures = 0

    async def _heartbeat_loop(self) -> None:
        period = self.config.heartbeat_period_ms / 1000.0
        if self.should_heartbeat():
            delay = self.initial_heartbeat_delay
        else:
            # nothing to report yet (producer without topics): the timer starts with the first
            # heartbeat_now() (Java: at the first publish), see deferred_heartbeat_delay
            assert self._hb_armed is not None
            await self._hb_armed.wait()
            delay = self.deferred_heartbeat_delay
        while not self.closed:
            await self._sleep(delay, wakeable=True)
            if self.closed:
                return
            delay = period
            if not self.should_heartbeat():
                continue
            try:
                await self._locked_heartbeat()
                self.metrics.inc("master.heartbeats")
            except ClientClosedError:
                return
            except NotRegisteredError as exc:
                log.info("%s %s unknown to the master (%s): registering again", self.role, self.client_id, exc)
                delay = await self._reregister()
            except StandbyError as exc:
                log.info("%s: master became standby (%s): registering with the next one", self.role, exc)
                delay = await self._reregister()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the heartbeat must survive anything
                self._hb_failures += 1
                self.last_error = exc
                self.metrics.inc("master.heartbeat_failures")
                if isinstance(exc, AuthenticationError):
                    self.require_auth = True
                log.warning("%s heartbeat failed (%d in a row): %s", self.role, self._hb_failures, exc)
                if self._hb_failures >= MAX_HEARTBEAT_RETRY_TIMES:
                    # after a run of failures the master has probably forgotten us
                    self.registered = False
                delay = self.failed_heartbeat_wait(self._hb_failures)

    def failed_heartbeat_wait(self, failures: int) -> float:
        """Seconds before the next heartbeat after ``failures`` in a row: ``register_retry_wait_ms``,
        doubling, at most ``heartbeat_fail_wait_ms`` and never longer than the period.

        Why not Java's 60 s pause after 5 failures: nothing brings that pause forward when the network
        returns, so a 10 s outage cost a group up to a minute; a capped retry reaches the master within
        the cap of its return, and a failure (refused or timed-out connect) costs the master nothing.
        Success resets the count (``_locked_heartbeat``)."""
        cfg = self.config
        period = cfg.heartbeat_period_ms / 1000.0
        cap = getattr(cfg, "heartbeat_fail_wait_ms", HEARTBEAT_FAIL_WAIT_MS) / 1000.0
        first = cfg.register_retry_wait_ms / 1000.0
        return min(period, cap, first * 2 ** min(max(failures - 1, 0), 16))

    async def _reregister(self) -> float:
        """Register again (forever, unless closed); returns the delay before the next heartbeat."""
        self.registered = False
        self.on_reregister()
        try:
            await self.register(max_attempts=None)
        except ClientClosedError:
            return 0.0
        except ServerError as exc:
            log.error("%s: re-register refused with a fatal code: %s", self.role, exc)
            self.last_error = exc
            return self.config.heartbeat_period_ms / 1000.0
        return 0.0  # heartbeat right away: it brings the metadata back

    def on_reregister(self) -> None:
        """Hook: the master lost this client (subclasses reset per-registration state)."""

    async def _stats_loop(self) -> None:
        cb = self.config.stats_callback
        assert cb is not None
        while not self.closed:
            await asyncio.sleep(self.config.stats_interval_ms / 1000.0)
            try:
                cb(self.metrics.snapshot())
            except Exception:  # user callback errors are theirs, never ours
                log.exception("stats_callback raised")

    async def _sleep(self, seconds: float, wakeable: bool = False) -> None:
        if not wakeable or self._wake is None:
            await asyncio.sleep(seconds)
            return
        with contextlib.suppress(asyncio.TimeoutError):
            await wait_for(self._wake.wait(), seconds)
        self._wake.clear()  # after waking: a trigger that came during the last heartbeat is not lost

    # ------------------------------------------------------------------ helpers for subclasses

    @property
    def current_master(self) -> str:
        return self.invoker.current_address if self.invoker is not None else ""

    async def call_master(self, method: int, request: Any, response_cls: type[Any]) -> Any:
        if self.invoker is None:
            raise ClientClosedError("session not started")
        return await self.invoker.call(method, request, response_cls)

    @staticmethod
    def check(response: Any) -> None:
        """Raise the ServerError for a ``success = false`` answer."""
        if not response.success:
            raise error_for_code(response.errCode, response.errMsg)

    def heartbeat_checksum(self) -> int:
        """Local broker checksum, or -1 when the list has not changed for 2 h (forces a full list)."""
        if time.monotonic() - self.broker_updated_at > BROKER_FORCED_REFRESH_S:
            return -1
        return self.broker_checksum

    def apply_brokers(self, checksum: int, broker_infos: Iterable[str]) -> bool:
        """Replace the broker map with a list the master sent (it sends one only when our checksum is
        stale or -1); True when a list was applied."""
        infos = list(broker_infos)
        if not infos:
            # the master omits the list when our checksum is current (§3.3); nothing to change
            return False
        brokers: dict[int, codec.BrokerInfo] = {}
        for text in infos:
            try:
                b = codec.parse_broker_info(text, self.default_broker_port)
            except DecodeError as exc:
                log.warning("ignoring bad brokerInfo %r: %s", text, exc)
                continue
            brokers[b.broker_id] = b
        self.brokers = brokers
        self.broker_checksum = checksum
        self.broker_updated_at = time.monotonic()
        return True

    def apply_authorized_info(self, response: Any, field: str = "authorizedInfo") -> None:
        """Store the visit token (and a non-blank auth token) of a master answer (§8.2)."""
        if response.HasField(field):
            info = getattr(response, field)
            self.visit_token = info.visitAuthorizedToken
            if info.authAuthorizedToken.strip():
                self.auth_token = info.authAuthorizedToken

    def apply_appd_config(self, response: Any, field: str = "appdConfig") -> None:
        """ApprovedClientConfig: remember configId; maxMsgSize (clamped 1..20 MiB) when present."""
        if response.HasField(field):
            cfg = getattr(response, field)
            self.config_id = cfg.configId
            if cfg.HasField("maxMsgSize") and cfg.maxMsgSize > 0:
                self.max_msg_size = max(MIN_MAX_MSG_SIZE, min(MAX_MAX_MSG_SIZE, cfg.maxMsgSize))

    def appd_config(self) -> master_pb.ApprovedClientConfig:
        return master_pb.ApprovedClientConfig(configId=self.config_id)

    def cert_info(self, *, force: bool) -> master_pb.MasterCertificateInfo | None:
        """authInfo for a master request, or None when auth is off (field then absent, like Java).

        ``force`` (register/close): a fresh AuthenticateInfo. Heartbeats: the last authAuthorizedToken
        (§8.2), but a fresh AuthenticateInfo after the master asked (requireAuth, or a 415) and while
        the master never issued a token: the upstream master's default certificate handler issues none
        and wants authInfo on every request, so a heartbeat with a blank token would be refused (415).
        """
        cfg = self.config
        if not cfg.auth_enabled:
            return None
        assert cfg.auth_user is not None and cfg.auth_password is not None
        if force or self.require_auth or not self.auth_token:
            return auth.master_cert_info(cfg.auth_user, cfg.auth_password)
        return auth.master_token_info(self.auth_token)

    def add_cert(self, req: Any, *, force: bool) -> None:
        """Set ``req.authInfo`` from cert_info (left absent when auth is off)."""
        cert = self.cert_info(force=force)
        if cert is not None:
            req.authInfo.CopyFrom(cert)

    # ------------------------------------------------------------------ subclass API

    async def _register_once(self) -> None:
        """Send one register request and apply the answer; raise ServerError on success=false."""
        raise NotImplementedError

    async def _heartbeat_once(self) -> None:
        """Send one heartbeat and apply the answer; raise ServerError on success=false."""
        raise NotImplementedError

    async def _close_once(self) -> None:
        """Send the close request."""
        raise NotImplementedError


__all__ = ["RUNTIME_VERSION", "MasterSessionBase"]
