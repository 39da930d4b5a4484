"""How a broker in another process joins an embedded master: an embedded-only admin call.

The real broker registers with the master over MasterService methods 7-9 (``RegisterRequestB2M``,
``HeartRequestB2M``, ``CloseRequestB2M``, docs/PROTOCOL.md §3.6), whose messages carry the broker's whole
configuration and checksums; this library does not implement them (its protobuf set has no broker<->
master messages), so a real TubeMQ broker cannot join the embedded master, nor an embedded broker a
real master. Instead a broker process calls the master's admin HTTP API every
``broker_heartbeat_period_ms``::

    GET /webapi.htm?type=op_modify&method=embedded_broker_heartbeat&brokerId=2&brokerIp=127.0.0.1
        &brokerPort=8124[&brokerTLSPort=...][&confModAuthToken=...]

and the answer carries the master's topic deployments (``data``, TopicConf JSON), their version
(``metaVersion``, echoed by the broker's next call so the master knows what each broker applied),
whether that master is a standby, its term and the admin URLs of every master of the pair (``masters``,
server/replication.py). The broker reports to every master it was given or told about (at most
``MAX_MASTERS``, each on its own timer) and takes topics only from an active master of the highest term
it has seen, so a standby knows the live brokers before it takes over and a stale master cannot undo a
newer one's topics. When a master of a new term does not list a topic the broker has, the broker keeps
it (and its data), reports it (``heldTopics``) and the active master adopts it: its copy had missed a
topic created just before the previous active master died. ``method=embedded_broker_status`` (op_query) lists the brokers with ``online`` and
``synced`` (has applied the master's current topic set). A topic created while the master runs is
handed out to producers and consumers on a broker process only once that broker echoed a version
listing it (it loads the topic at its next heartbeat: a producer sent there before would get "topic not
existed"); a version the master process never handed out (its previous run's) counts as none. The master marks a broker that missed ``broker_heartbeat_timeout_ms`` offline:
its partitions leave the producers' topicInfos and the consumers' assignments until it is back.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import json
import logging
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import _webcall as webcall
from ..errors import TubeMQError
from .config import ServerConfig
from .meta import BrokerEntry, MetaStore, TopicConf

log = logging.getLogger("tubemq.server.registration")

METHOD = "embedded_broker_heartbeat"
STATUS_METHOD = "embedded_broker_status"
MAX_ANSWER_BYTES = 16 * 1024 * 1024
CALL_TIMEOUT_S = 5.0
#: Masters a broker process reports to at most (given + learned from the active master's answers).
MAX_MASTERS = 8
#: Heartbeat periods without an active master of the broker's term after which it takes the topics of
#: an active master of a lower term (the masters were set up anew); until then such a master is stale.
STALE_TERM_PERIODS = 20
#: Held topics a broker reports in one heartbeat at most (the rest follow once these are adopted).
MAX_HELD_REPORT = 20


class AdminCallError(Exception):
    """The master's admin API could not be called or refused the call; ``answered`` is True when the
    peer did answer (an HTTP error or a body that is not JSON): it is alive."""

    def __init__(self, text: str, answered: bool = False) -> None:
        super().__init__(text)
        self.answered = answered


@dataclass(eq=False)
class BrokerTable:
    """The master side: which topic version each broker process applied."""

    meta: MetaStore
    broker_seen: Callable[[BrokerEntry], None]
    standby: Callable[[], bool]
    online: Callable[[int], bool]
    #: more fields of every heartbeat answer (the master pair's ``masters`` list)
    extra: Callable[[], dict[str, Any]] | None = None
    #: broker id -> the ``metaVersion`` it applied last (-1: none this master process handed out)
    applied: dict[int, int] = field(default_factory=dict, init=False)
    #: broker id -> the ``metaVersion`` of this process's last answer to it
    told: dict[int, int] = field(default_factory=dict, init=False)
    #: topic created while this master runs -> the ``metaVersion`` that first listed it
    since: dict[str, int] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self._names = {t.name for t in self.meta.topics()}
        self.meta.on_change.append(self._topics_changed)

    def _topics_changed(self) -> None:
        names = {t.name for t in self.meta.topics()}
        for name in names - self._names:
            self.since[name] = self.meta.version
        for name in self._names - names:
            self.since.pop(name, None)
        self._names = names

    def deployed(self, broker_id: int, topic: str) -> bool:
        """The broker has loaded the topic: a broker process echoed a version that lists it (it loads a
        new topic at its next heartbeat; a producer sent there before that gets "topic not existed").
        Brokers of this process read the master's store directly."""
        applied = self.applied.get(broker_id)
        first = self.since.get(topic)
        return applied is None or first is None or applied >= first

    def status(self, params: dict[str, str]) -> dict[str, Any]:
        data = [
            {
                "brokerId": bid,
                "brokerIp": b.host,
                "brokerPort": b.port,
                "online": self.online(bid),
                "synced": bid not in self.applied or self.applied[bid] == self.meta.version,
            }
            for bid, b in sorted(self.meta.brokers.items())
        ]
        return {
            "result": True,
            "errCode": 0,
            "errMsg": "OK",
            "masterStandby": self.standby(),
            "masterTerm": self.meta.term,
            "count": len(data),
            "data": data,
        }

    def heartbeat(self, params: dict[str, str]) -> dict[str, Any]:
        try:
            bid = int(params.get("brokerId", ""))
            host = params.get("brokerIp", "").strip()
            port = int(params.get("brokerPort", ""))
            tls_text = params.get("brokerTLSPort", "").strip()
            tls_port = int(tls_text) if tls_text else None
        except ValueError:
            return {"result": False, "errCode": 400, "errMsg": "brokerId, brokerIp and brokerPort are required"}
        if bid < 0 or not host or not 0 < port < 65536:
            return {"result": False, "errCode": 400, "errMsg": f"bad broker record {bid}:{host}:{port}"}
        try:
            echo = int(params.get("metaVersion", "-1"))
        except ValueError:
            echo = -1
        # a version this process never handed out is another master process's (this one restarted)
        self.applied[bid] = echo if echo <= self.told.get(bid, -1) else -1
        self.told[bid] = self.meta.version
        self.broker_seen(BrokerEntry(bid, host, port, tls_port))
        if params.get("heldTopics") and not self.standby():
            self._adopt(bid, params["heldTopics"])
        answer: dict[str, Any] = {
            "result": True,
            "errCode": 0,
            "errMsg": "OK",
            "standby": self.standby(),
            "term": self.meta.term,
            "metaVersion": self.meta.version,
            "data": [t.to_json() for t in self.meta.topics()],
        }
        if self.extra is not None:
            answer.update(self.extra())
        return answer


    def _adopt(self, bid: int, text: str) -> None:
        """Topics a broker kept when a new master term did not list them: this master's copy missed
        them (created on the previous active master just before it died). Deploy them again rather than
        let their data go."""
        try:
            records = json.loads(text)
        except ValueError:
            return
        for rec in records[:MAX_HELD_REPORT] if isinstance(records, list) else []:
            try:
                conf = TopicConf.from_json(rec)
                if self.meta.get(conf.name) is not None:
                    continue
                self.meta.create_topic(
                    conf.name, conf.num_partitions, conf.num_stores, conf.max_msg_size,
                    accept_publish=conf.accept_publish, accept_subscribe=conf.accept_subscribe,
                    broker_ids=conf.broker_ids,
                )
            except (TypeError, ValueError, AttributeError) as exc:  # ConfigError is a ValueError
                log.warning("broker %d holds a topic this master cannot adopt (%.200r): %s", bid, rec, exc)
                continue
            log.warning("adopted topic %s held by broker %d: this master's copy had missed it", conf.name, bid)


def url_host_port(url: str) -> tuple[str, int] | None:
    """(host, port) of an ``http://HOST:PORT/...`` URL, None when it is not one."""
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port or 80
    except ValueError:
        return None
    if parts.scheme != "http" or not parts.hostname:
        return None
    return parts.hostname, port


_CALLERS: list[concurrent.futures.ThreadPoolExecutor] = []
_CALLERS_LOCK = threading.Lock()


def _callers() -> concurrent.futures.ThreadPoolExecutor:
    """The threads of the servers' admin calls, their own: a master that stopped answering holds a
    thread for a call's timeout, which must not starve the event loop's default executor (or the
    other masters' heartbeats, all running at once)."""
    with _CALLERS_LOCK:
        if not _CALLERS:
            _CALLERS.append(concurrent.futures.ThreadPoolExecutor(
                max_workers=4 * MAX_MASTERS, thread_name_prefix="tubemq-admin-call"))
        return _CALLERS[0]


async def admin_get(url: str, params: dict[str, str], timeout: float = CALL_TIMEOUT_S) -> dict[str, Any]:
    """One admin API call (bounded answer, bounded time) through the admin clients' transport
    (:mod:`tubemq._webcall`) in one of :func:`_callers`; the environment's proxies are not used between
    servers."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise AdminCallError(f"admin URL must be http://HOST:PORT/..., got {url!r}")
    target = urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path or "/webapi.htm",
                                      urllib.parse.urlencode(params), ""))
    call = functools.partial(webcall.request, target, timeout=timeout, max_bytes=MAX_ANSWER_BYTES, proxies=False)
    try:
        answer = await asyncio.get_running_loop().run_in_executor(_callers(), call)
    except TubeMQError as exc:
        raise AdminCallError(f"admin call to {url} failed: {exc}") from None
    if answer.status != 200:
        raise AdminCallError(f"admin call to {url} answered {answer.status} {answer.reason}", answered=True)
    if len(answer.body) > MAX_ANSWER_BYTES:
        raise AdminCallError(f"answer of {url} larger than {MAX_ANSWER_BYTES} bytes", answered=True)
    try:
        decoded = json.loads(answer.body)
    except ValueError as exc:
        raise AdminCallError(f"admin call to {url}: not JSON ({exc})", answered=True) from None
    if not isinstance(decoded, dict):
        raise AdminCallError(f"admin call to {url}: not a JSON object", answered=True)
    return decoded


class BrokerRegistrar:
    """The broker-process side: heartbeat every master, take topics from the active one of the highest term."""

    def __init__(self, config: ServerConfig, entry: Callable[[], BrokerEntry], meta: MetaStore) -> None:
        #: the masters' admin URLs: the configured ones, then those the active master tells about
        self.admin_urls = [u.strip() for u in (config.master_admin_url or "").split(",") if u.strip()]
        self.entry = entry
        self.meta = meta
        self.period_s = config.broker_heartbeat_period_ms / 1000
        self.token = config.admin_token
        self.last_ok: dict[str, float] = {}
        self.registered = asyncio.Event()
        self._failures: dict[str, int] = {}
        #: admin URL -> the master's metaVersion this broker applied last (echoed back)
        self._applied: dict[str, int] = {}
        #: highest master term seen in an active master's answer (persisted with the topics: a restarted
        #: broker does not take the topic set of a stale master that comes back with an older term)
        self.term = meta.term
        #: when an active master of term >= ``term`` last answered (the start counts as such an answer)
        self._term_seen = time.monotonic()
        #: topics (and their data) kept although the master of a new term did not list them, reported
        #: to it for adoption until it lists them: a broker drops data only for a deletion in one term
        self.held: dict[str, TopicConf] = {}

    def _params(self, url: str) -> dict[str, str]:
        e = self.entry()
        params = {
            "type": "op_modify",
            "method": METHOD,
            "brokerId": str(e.broker_id),
            "brokerIp": e.host,
            "brokerPort": str(e.port),
            "metaVersion": str(self._applied.get(url, -1)),
        }
        if e.tls_port is not None:
            params["brokerTLSPort"] = str(e.tls_port)
        if self.token:
            params["confModAuthToken"] = self.token
        if self.held:
            params["heldTopics"] = json.dumps([t.to_json() for t in list(self.held.values())[:MAX_HELD_REPORT]])
        return params

    async def beat_once(self) -> None:
        """One heartbeat to every master at once (a master that does not answer delays no other)."""
        await asyncio.gather(*(self._beat(url) for url in list(self.admin_urls)))

    async def _beat(self, url: str) -> None:
        try:
            answer = await admin_get(url, self._params(url))
            if not answer.get("result"):
                raise AdminCallError(f"{url} refused the broker: {answer.get('errMsg')}")
        except AdminCallError as exc:
            n = self._failures[url] = self._failures.get(url, 0) + 1
            (log.warning if n in (1, 10) or n % 100 == 0 else log.debug)("broker heartbeat: %s", exc)
            return
        self._failures[url] = 0
        self.last_ok[url] = time.monotonic()
        self.apply(url, answer)

    def apply(self, url: str, answer: dict[str, Any]) -> None:
        """Take a master's heartbeat answer: its topics when it is active and of the right term."""
        term = answer.get("term", 0)
        term = term if isinstance(term, int) and not isinstance(term, bool) else 0
        new_term = term != self.term
        # a standby's topic set may be stale, and so may an active master's of an older term
        if not answer.get("standby") and self._take_term(url, term):
            topics = [TopicConf.from_json(t) for t in answer.get("data", [])]
            names = {t.name for t in topics}
            if new_term:  # keep what the new term's master does not know (yet): never drop data for that
                for t in self.meta.topics():
                    if t.name not in names and t.name not in self.held:
                        log.warning("keeping topic %s and its data: the master of term %d (%s) does not list it;"
                                    " reporting it for adoption", t.name, term, url)
                        self.held[t.name] = t
            for name in [n for n in self.held if n in names]:
                del self.held[name]  # listed (adopted)
            if self.meta.sync_topics(topics + list(self.held.values())):
                log.info("topic deployments from %s: %s", url, [t.name for t in topics])
            self.registered.set()
            self._learn_masters(answer.get("masters"))
        self._applied[url] = int(answer.get("metaVersion", -1))

    def _take_term(self, url: str, term: int) -> bool:
        """Whether to take the topics of an active master of ``term`` (and remember that term)."""
        now = time.monotonic()
        if term < self.term:
            silent = now - self._term_seen
            if silent <= STALE_TERM_PERIODS * self.period_s:
                log.debug("ignoring the topics of %s: term %d is older than %d", url, term, self.term)
                return False
            log.warning("no active master of term %d for %.1f s: taking the topics of %s (term %d)",
                        self.term, silent, url, term)
        if term != self.term:
            self.meta.set_term(term)
            self.term = term
        self._term_seen = now
        return True

    def _learn_masters(self, urls: Any) -> None:
        """Report to the standbys the active master names too (a broker given one master finds the pair)."""
        if not isinstance(urls, list):
            return
        known = {url_host_port(u) for u in self.admin_urls}
        for url in urls:
            if not isinstance(url, str) or len(self.admin_urls) >= MAX_MASTERS:
                continue
            key = url_host_port(url)
            if key is not None and key not in known:
                log.info("reporting to master %s too (named by the active master)", url)
                self.admin_urls.append(url)
                known.add(key)

    async def run(self) -> None:
        """A heartbeat loop per master (learned masters get theirs as they appear): a slow or dead master
        never delays the heartbeats to the others."""
        loops: dict[str, asyncio.Task[None]] = {}
        try:
            while True:
                for url in list(self.admin_urls):
                    if url not in loops:
                        loops[url] = asyncio.create_task(self._beat_loop(url), name=f"tubemq-broker-hb {url}")
                await asyncio.sleep(self.period_s)
        finally:
            for task in loops.values():
                task.cancel()
            await asyncio.gather(*loops.values(), return_exceptions=True)

    async def _beat_loop(self, url: str) -> None:
        while True:
            await asyncio.sleep(self.period_s)  # start() already sent the first heartbeat
            try:
                await self._beat(url)
            except Exception:  # one bad answer must not stop the registration for good
                log.exception("broker heartbeat to %s failed", url)
