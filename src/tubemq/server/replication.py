"""Two embedded masters: the active one serves, a standby mirrors its metadata and takes over.

How real TubeMQ does it (apache/inlong ``inlong-tubemq``): the masters of a cluster share one
replicated meta store, BDB-JE High Availability (``[meta_bdb]`` in ``conf/master.ini``: a replication
group, every node on its ``repNodePort``) or, in newer releases, ZooKeeper (``[meta_zookeeper]``, master
selection checked every ``zkMasterCheckPeriodMs``). The store elects one master; every RPC of a node that
is not the master answers ``StandbyException`` "HOST:PORT is not master now" (``TMaster.checkNodeStatus``),
and its web API redirects every request to the master's web port (``MasterStatusCheckFilter``). Brokers
(``masterAddressList`` in ``broker.ini``) and clients (``"h1:8715,h2:8715"``) are given every master
address and move to the next one on a StandbyException or a lost connection (a real broker talks to one
master at a time through a failover RPC proxy over that list, ``TubeBroker``). Topics, broker and cluster
configuration survive a master failure because they are in the replicated store; group offsets are not
master state at all (the brokers keep them: ``ZkOffsetStorage`` / ``FileOffsetStorage``).

The embedded equivalent, and why:

* **Replication over the admin API, not a shared file.** A standby (``peer_master`` + the peer's admin
  URL: ``master_admin_url``, ``tubemq serve --peer-admin-url``, else the endpoints file the peer's
  ``tubemq serve`` publishes) calls the active master's ``op_modify`` / ``embedded_master_sync`` every
  ``broker_heartbeat_period_ms`` (500 ms, the period the brokers report at too) and takes its topic
  set, broker records, admin broker configure records and term, persisting them in its own data
  directory. A shared ``meta.json`` with file locks would tie both masters to one disk and one machine,
  turn a torn write or a stale NFS lock into a cluster-wide outage, and still need a leader rule; a
  pull over loopback (or the network) keeps each master's store its own, like BDB-JE replicas, and is
  the same channel the broker processes already use. The call is an ``op_modify`` so the admin token
  guards it: it registers the caller as a standby whose address the active master hands to brokers.
  The topic list travels only when it changed since the version the standby applied (``knownTopics``).
  After every topic change the active master pokes its standbys (``embedded_master_poke``) so they copy
  at once: the window in which a topic exists only on the active master is a round trip, not a period
  (the admin call does not wait for it, like BDB-JE with replica ack policy NONE).
* **Brokers report to every master** (a difference from the real broker, which reports to the active
  one only): a broker process heartbeats every admin URL it was given and every standby the active
  master names in its answers (``masters``), so the standby knows which brokers are alive before it
  takes over instead of waiting for them to find it. Brokers take topic deployments only from an active master of the highest
  term they have seen.
* **Only the active master changes metadata.** On a standby, admin modify calls (other than the
  embedded registration and sync calls) are refused with ``errCode`` 302 and the active master's admin
  URL (the real one redirects); queries answer from the replica.
* **Takeover.** A standby whose peer has not answered its sync call (a request with a deadline, so a
  frozen process that still accepts connections counts as down; a peer that answers with a refusal
  is alive) for ``takeover_after_ms`` (2 s) raises the term (persisted in ``meta.json``) and becomes active, unless its store never held a
  copy of an active master's metadata (``MetaStore.authoritative``): brokers drop the data of topics
  their master no longer lists, so an empty standby taking over would empty every broker. For the same
  reason its last copy must be from at most ``FRESH_COPY_PERIODS`` (20) periods before the peer went
  down: a standby that lost contact long before (or restarted after its peer died) waits, and says so;
  an operator who accepts its copy restarts it without ``--standby``. A master that starts with
  ``peer_master`` while that peer is active starts as a standby (a restarted old master joins as the
  replica). Every sync call carries the caller's term and role, so a master started without
  ``peer_master`` (the old master restarted with its first command line) steps down for an active caller
  that outranks it and replicates from it. Two active masters (both started at once, or a healed split) resolve by term, then by the
  lower ``host:port``: the other steps down, forgets its client sessions and replicates from the winner.
  A master whose own loop was frozen for half of ``takeover_after_ms`` (``server/fence.py``) answers
  clients as a standby from its first request after the wake until a round started after it has
  asked the peer: it then steps down for a peer of a higher term, or serves again.
  Two masters have no quorum: if the peer is alive but unreachable, both serve until they see each
  other again, and topic changes made on the loser meanwhile are replaced by the winner's (logged).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Callable
from typing import Any, Protocol

from .._tasks import wait_for
from .admin import AdminApi
from .endpoints import lookup
from .fence import Fence
from .meta import BrokerEntry, MetaStore, TopicConf
from .registration import METHOD as REGISTRATION_METHOD
from .registration import STATUS_METHOD, AdminCallError, admin_get, url_host_port

log = logging.getLogger("tubemq.server.replication")

SYNC_METHOD = "embedded_master_sync"
POKE_METHOD = "embedded_master_poke"
#: Admin calls a standby answers itself; every other op_modify is refused with the active master's URL.
LOCAL_METHODS = frozenset({REGISTRATION_METHOD, STATUS_METHOD, SYNC_METHOD, POKE_METHOD})
POKE_TIMEOUT_S = 2.0
#: A standby takes over only with a copy made at most this many periods before its peer went down.
FRESH_COPY_PERIODS = 20
NOT_MASTER = 302
#: Standbys an active master remembers (and names to brokers); each must call again within the TTL.
MAX_STANDBYS = 8
STANDBY_TTL_PERIODS = 20
MAX_URL_LENGTH = 256


def _broker_json(b: BrokerEntry) -> dict[str, Any]:
    return {"brokerId": b.broker_id, "brokerIp": b.host, "brokerPort": b.port, "brokerTLSPort": b.tls_port}


def _broker_entry(d: Any) -> BrokerEntry | None:
    try:
        tls = d.get("brokerTLSPort")
        return BrokerEntry(int(d["brokerId"]), str(d["brokerIp"]), int(d["brokerPort"]), int(tls) if tls else None)
    except (AttributeError, KeyError, TypeError, ValueError):
        return None


class ReplicationHost(Protocol):
    """The server process a master's replication works for, read afresh at every use: its running
    Master (None while it restarts), where that master serves, and its admin API (the broker configure
    records travel with the metadata)."""

    @property
    def master(self) -> Any: ...
    @property
    def master_address(self) -> str: ...
    @property
    def admin_url(self) -> str: ...
    @property
    def admin_api(self) -> AdminApi | None: ...


class MasterReplication:
    """One master's side of the pair: answers the peer's sync calls, replicates, takes over, steps down."""

    def __init__(self, config: Any, meta: MetaStore, host: ReplicationHost) -> None:
        self.config = config
        self.meta = meta
        self.host = host
        self.period_s = config.broker_heartbeat_period_ms / 1000
        self.takeover_s = config.takeover_after_ms / 1000
        #: standby admin URL -> monotonic time of its last sync call (active side)
        self.standbys: dict[str, float] = {}
        #: the peer as last seen: when, standby or not, its term and master address
        self.peer_seen: float | None = None
        self.peer_standby: bool | None = None
        self.peer_term = 0
        self.peer_address = str(config.peer_master or "")
        #: a peer learned from its sync calls (a master started without ``peer_master``): (address, admin URL)
        self.learned: tuple[str, str] | None = None
        self.synced_once = False
        #: when this process last confirmed its copy equal to an active peer's metadata
        self.copied_at: float | None = None
        #: this process's topic-set identity (``epoch:version``): a standby that has it gets no topic list
        self.epoch = secrets.token_hex(8)
        #: standby side: the active master's ``epoch:version`` whose topics this master applied
        self._known_topics = ""
        self._down_since: float | None = None
        self._both_standby_since: float | None = None
        self._failures = 0
        #: whether the last sync call got any answer from the peer (None: no admin URL to call)
        self._peer_answered: bool | None = None
        #: set by a poke: replicate now instead of at the end of the period
        self._wake = asyncio.Event()
        #: holds client calls after this process was frozen (server/fence.py)
        self.fence = Fence(self.takeover_s / 2, self._wake.set)
        self._pokes: set[asyncio.Task[None]] = set()
        meta.on_change.append(self._topics_changed)

    # ---- the active side: answer a standby's sync call

    def sync(self, params: dict[str, str]) -> dict[str, Any]:
        """``op_modify`` / ``embedded_master_sync``: remember the caller (brokers are told to report to it),
        yield to it when it is an active master that outranks this one, return the metadata."""
        caller = params.get("callerAdminUrl", "").strip()
        if caller:
            if len(caller) > MAX_URL_LENGTH or url_host_port(caller) is None:
                return {"result": False, "errCode": 400, "errMsg": f"bad callerAdminUrl {caller[:80]!r}"}
            self._remember_standby(caller)
            self._yield_to(caller, params)
        master = self.host.master
        standby = master is None or master.standby
        store = self._broker_confs()
        confs = list(store.records.values()) if store is not None else []
        answer: dict[str, Any] = {
            "result": True,
            "errCode": 0,
            "errMsg": "OK",
            "standby": standby,
            "term": self.meta.term,
            "masterAddress": self.host.master_address,
            "topicsVersion": f"{self.epoch}:{self.meta.version}",
            "brokers": [_broker_json(b) for _, b in sorted(self.meta.brokers.items())],
            "brokerConfs": confs,
        }
        if params.get("knownTopics") != answer["topicsVersion"]:  # the caller's copy is not this one
            answer["topics"] = [t.to_json() for t in self.meta.topics()]
        return answer

    def _broker_confs(self) -> Any:
        """The admin API's broker configure records (``records`` + ``put``), None where there are none."""
        store = getattr(self.host.admin_api, "broker_confs", None)
        return store if hasattr(store, "records") and hasattr(store, "put") else None

    def _yield_to(self, caller_url: str, params: dict[str, str]) -> None:
        """A master started without ``peer_master`` learns its peer from the peer's calls: it steps down
        for an active caller of a higher term (or the same term and a lower address), and a standby
        without a peer starts replicating from an active caller. (The old active master restarted with
        its first command line while the standby it had has taken over: it must not serve stale topics.)"""
        master = self.host.master
        address = params.get("callerAddress", "").strip()
        if self.config.role != "master" or self.config.peer_master or master is None or ":" not in address:
            return
        try:
            term = int(params.get("callerTerm", ""))
        except ValueError:
            return
        if params.get("callerStandby") != "false":
            return
        if not master.standby and (term, self.host.master_address) > (self.meta.term, address):
            log.warning("active master %s of term %d called (this one: term %d): stepping down", address, term,
                        self.meta.term)
            master.standby = True
        if master.standby and self.learned != (address, caller_url):
            log.info("replicating from the active master %s (%s)", address, caller_url)
            self.learned = (address, caller_url)
            self.peer_address = address

    def poke(self, params: dict[str, str]) -> dict[str, Any]:
        """``op_modify`` / ``embedded_master_poke``: the active master changed its topics, copy them now."""
        self._wake.set()
        return {"result": True, "errCode": 0, "errMsg": "OK"}

    def _topics_changed(self) -> None:
        """Active side: poke the standbys so that the window in which a new topic exists only here is a
        round trip, not a replication period."""
        master = self.host.master
        if master is None or master.standby or not self.standbys:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # changed outside the server's loop: the next period carries it
            return
        for url in self.masters()[1:]:
            task = loop.create_task(self._send_poke(url))
            self._pokes.add(task)
            task.add_done_callback(self._pokes.discard)

    async def _send_poke(self, url: str) -> None:
        params = {"type": "op_modify", "method": POKE_METHOD}
        if self.config.admin_token:
            params["confModAuthToken"] = self.config.admin_token
        try:
            await admin_get(url, params, POKE_TIMEOUT_S)
        except AdminCallError as exc:
            log.debug("poke of standby %s failed: %s", url, exc)

    def _remember_standby(self, url: str) -> None:
        now = time.monotonic()
        if url not in self.standbys and len(self.standbys) >= MAX_STANDBYS:
            oldest = min(self.standbys, key=self.standbys.__getitem__)
            del self.standbys[oldest]
        self.standbys[url] = now

    def masters(self) -> list[str]:
        """Admin URLs of every master a broker should report to: this one and its live standbys."""
        limit = time.monotonic() - STANDBY_TTL_PERIODS * self.period_s
        return [self.host.admin_url, *sorted(u for u, t in self.standbys.items() if t >= limit)]

    # ---- the standby side

    @property
    def peer(self) -> str | None:
        """HOST:PORT of the peer's master RPC port: configured, or learned from its calls."""
        if self.config.peer_master:
            return str(self.config.peer_master)
        return self.learned[0] if self.learned is not None else None

    def peer_admin_url(self) -> str | None:
        """The configured peer admin URL, else the one the peer's ``tubemq serve`` published here, else
        the one it called from."""
        if not self.config.peer_master:
            return self.learned[1] if self.learned is not None else None
        if self.config.master_admin_url:
            return str(self.config.master_admin_url)
        ep = lookup(self.config.peer_master)
        return ep.admin_url if ep is not None else None

    async def poll_peer(self, timeout: float | None = None, url: str | None = None) -> dict[str, Any] | None:
        """One sync call to the peer (or to ``url``); its answer, or None (unreachable, refused, or no URL
        known)."""
        url = url or self.peer_admin_url()
        self._peer_answered = None
        if url is None:
            self._log_failure(f"no admin URL known for peer master {self.peer}: give the peer's admin URL")
            return None
        master = self.host.master
        params = {
            "type": "op_modify",
            "method": SYNC_METHOD,
            "callerTerm": str(self.meta.term),
            "callerStandby": "true" if master is None or master.standby else "false",
            "callerAddress": self.host.master_address,
        }
        if master is None or not master.standby:
            self._known_topics = ""  # an active master's topics are its own: the next copy is a full one
        elif self._known_topics:
            params["knownTopics"] = self._known_topics
        own = self.host.admin_url
        key = url_host_port(own)
        if key is not None and key[1] != 0:  # not before this master's admin API listens
            params["callerAdminUrl"] = own
        if self.config.admin_token:
            params["confModAuthToken"] = self.config.admin_token
        try:
            answer = await admin_get(url, params, timeout if timeout is not None else min(5.0, max(1.0, 2 * self.period_s)))
        except AdminCallError as exc:
            self._peer_answered = exc.answered
            self._log_failure(str(exc))
            return None
        self._peer_answered = True
        if not answer.get("result"):
            self._log_failure(f"peer master {url} refused the sync call: {answer.get('errMsg')}")
            return None
        self._failures = 0
        self.peer_seen = time.monotonic()
        self.peer_standby = bool(answer.get("standby"))
        term = answer.get("term", 0)
        self.peer_term = term if isinstance(term, int) and not isinstance(term, bool) else 0
        self.peer_address = str(answer.get("masterAddress") or self.peer or "")
        return answer

    def _log_failure(self, text: str) -> None:
        self._failures += 1
        n = self._failures
        (log.warning if n in (1, 10) or n % 100 == 0 else log.debug)("master replication: %s", text)

    def apply(self, answer: dict[str, Any]) -> None:
        """Take the active peer's topics, brokers, broker configure records and term as they are."""
        if "topics" in answer:  # absent: unchanged since the version this master applied
            self._apply_topics(answer["topics"])
            self._known_topics = str(answer.get("topicsVersion", ""))
            self.meta.set_authoritative()
        master = self.host.master
        now = time.monotonic()
        for d in answer.get("brokers") or []:
            entry = _broker_entry(d)
            if entry is None:
                continue
            self.meta.set_broker(entry)
            if master is not None:  # a broker that never reports here goes offline after its timeout
                master.topology.heartbeats.setdefault(entry.broker_id, now)
        store = self._broker_confs()
        if store is not None:
            for rec in answer.get("brokerConfs") or []:
                if isinstance(rec, dict) and isinstance(rec.get("brokerId"), int):
                    if store.records.get(rec["brokerId"]) != rec:
                        try:
                            store.put(rec)
                        except Exception as exc:  # a full record table or disk: the topics still count
                            log.warning("master replication: broker configure record %s not kept: %s",
                                        rec["brokerId"], exc)
        if self.peer_term > self.meta.term:
            self.meta.set_term(self.peer_term)
        self.copied_at = time.monotonic()
        if not self.synced_once:
            self.synced_once = True
            log.info("standby holds the active master's metadata: %d topics, %d brokers, term %d",
                     len(self.meta.topics()), len(self.meta.brokers), self.meta.term)

    def _apply_topics(self, records: Any) -> None:
        topics: list[TopicConf] = []
        for t in records if isinstance(records, list) else []:
            try:
                topics.append(TopicConf.from_json(t))
            except (TypeError, ValueError):
                log.warning("master replication: skipping a malformed topic record %.200r", t)
        before = {t.name for t in self.meta.topics()}
        if self.meta.sync_topics(topics):
            after = {t.name for t in topics}
            log.info(
                "replicated topics from the active master: +%s -%s (%d in all)",
                sorted(after - before), sorted(before - after), len(after),
            )

    async def initial_standby(self) -> bool:
        """At start: True when the peer is an active master already (this one must join as standby)."""
        answer = await self.poll_peer(timeout=min(5.0, max(2.0, 4 * self.period_s)))
        if answer is None or self.peer_standby:
            return False
        log.warning("peer master %s is active (term %d): starting as its standby", self.peer,
                    self.peer_term)
        self.apply(answer)
        return True

    async def _peer_port_open(self) -> bool:
        host, _, port = (self.peer or "").rpartition(":")
        try:
            _, writer = await wait_for(asyncio.open_connection(host, int(port)), 1.0)
        except (OSError, asyncio.TimeoutError, ValueError):
            return False
        writer.close()
        return True

    def _outranked(self) -> bool:
        """An active peer beats this master: higher term, or the same term and a lower address."""
        return (self.peer_term, self.host.master_address) > (self.meta.term, self.peer_address)

    def _take_over(self, master: Any, why: str) -> None:
        if not self.meta.authoritative:
            self._log_failure(f"{why}, but this standby never held a copy of the active master's metadata: "
                              "it does not take over (its empty topic set would make the brokers drop data)")
            return
        term = max(self.meta.term, self.peer_term) + 1
        self.meta.set_term(term)
        if not self.synced_once:
            log.warning("taking over with the metadata copy saved before this process started")
        log.warning("%s: taking over as the active master (term %d)", why, term)
        master.standby = False
        self._down_since = self._both_standby_since = None

    def fenced(self) -> bool:
        """Whether client calls must be answered as by a standby now (this master of a pair was frozen)."""
        return self.config.role == "master" and (self.peer is not None or bool(self.standbys)) and self.fence.blocked()

    async def _ask_standbys(self, master: Any) -> None:
        """An active master without a configured peer, held by its fence: one of the standbys it had may
        have taken over meanwhile. Ask each; step down for one that is active and outranks this master
        (and replicate from it, as for a master learned from its calls)."""
        for url in sorted(self.standbys):
            answer = await self.poll_peer(url=url)
            if answer is not None and not self.peer_standby and self._outranked():
                log.warning("master %s took over with term %d while this one was frozen (term %d): stepping down",
                            self.peer_address, self.peer_term, self.meta.term)
                master.standby = True
                self.learned = (self.peer_address, url)
                self.apply(answer)
                return

    async def round(self) -> None:
        """One replication / watch round."""
        master = self.host.master
        if master is None:
            return
        started = time.monotonic()
        if self.peer is None:
            if self.fence.held_since is not None and not master.standby:
                await self._ask_standbys(master)
            self.fence.release(started)
            return
        answer = await self.poll_peer()
        now = time.monotonic()
        if not master.standby:
            self.meta.set_authoritative()  # an active master's store is the cluster's metadata
            if answer is not None and not self.peer_standby and self._outranked():
                log.warning("peer master %s is active with term %d (this one: %d): stepping down",
                            self.peer, self.peer_term, self.meta.term)
                master.standby = True
                self.apply(answer)
            self.fence.release(started)
            return
        self.fence.release(started)
        if answer is not None and not self.peer_standby:
            self._down_since = self._both_standby_since = None
            self.apply(answer)
            return
        # alive: it answered (if only with a refusal); with no admin URL to ask, an open port counts
        if answer is not None or self._peer_answered or (self._peer_answered is None and await self._peer_port_open()):
            self._down_since = None
            if answer is None:
                return  # alive but refusing the sync call: never take over from a live master
            # both standby: the higher term (then the lower address) takes over after the same delay
            since = self._both_standby_since = self._both_standby_since or now
            if now - since >= self.takeover_s and not self._outranked():
                self._take_over(master, f"peer master {self.peer} is a standby too")
            return
        since = self._down_since = self._down_since or now
        if now - since < self.takeover_s:
            return
        why = f"peer master {self.peer} has not answered for {now - since:.1f} s"
        if self.copied_at is None or since - self.copied_at > FRESH_COPY_PERIODS * self.period_s:
            age = "no copy made by this process" if self.copied_at is None else (
                f"the last copy is from {since - self.copied_at:.1f} s before it went down")
            self._log_failure(f"{why}, but {age}: not taking over (a stale topic set would make the brokers "
                              "drop newer topics); restart this master without --standby to force it")
            return
        self._take_over(master, why)

    async def run(self) -> None:
        while True:
            # asyncio.wait, not wait_for: on Python < 3.12 wait_for can turn a cancel that meets its own
            # time-out into a TimeoutError, and this loop would then outlive the server's stop()
            woken = asyncio.ensure_future(self._wake.wait())
            try:
                await asyncio.wait({woken}, timeout=self.period_s)
            finally:
                woken.cancel()
            self._wake.clear()
            try:
                await self.round()
            except Exception:  # one bad round must not stop replication or takeover for good
                log.exception("master replication round failed")


class ReplicatedAdminApi(AdminApi):
    """The admin API of a master with a peer: a standby refuses metadata changes (only the active master
    changes metadata; the standby copies it) and names the active master's admin URL."""

    def __init__(
        self,
        *args: Any,
        standby: Callable[[], bool],
        active_admin_url: Callable[[], str | None],
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self._is_standby = standby
        self._active_admin_url = active_admin_url

    def handle(self, params: dict[str, str]) -> dict[str, Any]:
        if (
            self.config.role == "master"  # a pair; an all-in-one server's brokers answer their own calls
            and params.get("type") == "op_modify"
            and params.get("method") not in LOCAL_METHODS
            and self._is_standby()
        ):
            url = self._active_admin_url()
            where = f"the active master's admin API {url}" if url else "the active master"
            return {
                "result": False,
                "errCode": NOT_MASTER,
                "errMsg": f"this master is a standby (not master now): send modify calls to {where}",
                "activeMaster": url or "",
            }
        return super().handle(params)
