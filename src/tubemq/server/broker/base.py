"""What the broker's handler families share: the opening checks, texts and helpers, and the parts.

The broker (``server/broker/__init__.py``) is assembled from handler families, one module each, like
the master's: sends, consumer register/heartbeat, getMessage/commit and the admin views. They open with
the checks of ``BrokerBase`` in the real broker's order (docs/PROTOCOL.md §5.3) and keep their state in
the parts ``BrokerBase`` builds (registrations, catalog, offsets, commit journal, send durability,
faults), each reached through its own small interface.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from ...protocol import constants as C
from ...protocol.constants import ErrorCode as E
from ..config import ServerConfig
from ..meta import MetaStore, TopicConf
from ..rpc import RpcContext
from ..storage import MessageStore
from ..storage.manager import StoreManager
from .catalog import Catalog
from .commits import CommitJournal
from .durability import SendDurability
from .faults import FaultInjector
from .offsets import OffsetStore
from .registry import Key, Registrations
from .views import BrokerViews

# Java String.trim() removes every char <= ' '.
_JAVA_WS = "".join(chr(i) for i in range(33))
_OK = "OK!"
_TOKEN_INVALID = "Visit Authorized Token is invalid!"
_TOKEN_UNVERIFIED = "Visit Authorized Token is invalid! (register or heartbeat with a valid token on this connection first)"
_STORE_UNAVAILABLE = "StoreService temporary unavailable!"



def _text(value: Any) -> str:
    """upb hands proto2 strings with invalid UTF-8 back as bytes; Java would decode them leniently."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


#: Length limits of the request strings every broker handler checks first.
_FIELD_LIMITS = {
    "clientId": C.META_MAX_CLIENT_ID_LENGTH,
    "topicName": C.META_MAX_TOPICNAME_LENGTH,
    "groupName": C.META_MAX_GROUPNAME_LENGTH,
}


#: Length limits of the request strings every broker handler checks first.
_FIELD_LIMITS = {
    "clientId": C.META_MAX_CLIENT_ID_LENGTH,
    "topicName": C.META_MAX_TOPICNAME_LENGTH,
    "groupName": C.META_MAX_GROUPNAME_LENGTH,
}


def _precheck(req: Any, *names: str) -> tuple[list[str], str | None]:
    """The opening string checks of the broker handlers, in the order given (the real broker's order
    differs per handler): one trimmed value per name, and the first failure's errMsg (answered 400)."""
    values = []
    for name in names:
        value, err = _check_string(getattr(req, name), name, _FIELD_LIMITS[name])
        if err:
            return [""] * len(names), err
        values.append(value)
    return values, None


def _java_len(s: str) -> int:
    return len(s) if s.isascii() else len(s.encode("utf-16-le", "surrogatepass")) // 2


def _check_string(value: Any, name: str, limit: int) -> tuple[str, str | None]:
    """PBParameterUtils.getStringParameter: (trimmed value, error text or None)."""
    if type(value) is str and value and value[0] > " " and value[-1] > " " and value.isascii():
        # hot path: nothing to trim, length in UTF-16 units == len()
        return value, (None if len(value) <= limit else f"{name}'s length over max value, allowed max length is {limit}")
    s = _text(value).strip(_JAVA_WS)
    if not s:
        return s, f"Request miss necessary {name} data!"
    if _java_len(s) > limit:
        return s, f"{name}'s length over max value, allowed max length is {limit}"
    return s, None


def _topic_missing(name: str) -> str:
    """errMsg of a request naming a topic this broker does not hold (answered 403)."""
    return f"topicName {name} not existed, please check your configure"


def _partition_missing(name: str, pid: int) -> str:
    """errMsg of a request naming a partition the topic does not have on this broker (answered 403)."""
    return f"partitionId {name}-{pid} not existed, please check your configure"


def _refusal(resp: Callable[..., Any], **fields: Any) -> Callable[[int, str], Any]:
    """``fail(code, text)``: a handler's ``success=false`` answer of type ``resp``; ``fields`` are the
    answer type's other required fields (e.g. ``currOffset=-1``), the same for every refusal."""

    def fail(code: int, text: str) -> Any:
        return resp(success=False, errCode=code, errMsg=text, **fields)

    return fail


def _clamp(value: int, low: int, high: int) -> int:
    """MixedUtils.mid."""
    return min(max(value, low), high)


def _int32(value: int) -> int:
    """Java's (int) cast of a long: minLimitTime is an int32 filled from a data offset."""
    return (value + 0x80000000) % 0x100000000 - 0x80000000


class BrokerBase:
    """Broker state shared by the handler families, the opening checks and the fault hook."""

    def __init__(
        self,
        config: ServerConfig,
        meta: MetaStore,
        store_manager: StoreManager,
    ) -> None:
        self.config = config
        self.meta = meta
        self.stores = store_manager
        #: the topics deployed here and their partitions' stores
        self.catalog = Catalog(meta, store_manager, config.broker_id)
        #: the master's visit-token check (None = off); set by the cluster once its master exists
        self.visit_token_check: Callable[[int], bool] | None = None
        #: test switches: False makes the read / write service answer 503 like a stopping broker
        self.read_available = True
        self.write_available = True
        self.offsets = OffsetStore(config.data_dir)
        #: consumer registrations and their in-flight reads (the sessions part's state)
        self.registrations = Registrations(config.consumer_reg_timeout_ms / 1000.0)
        self._last_mid = 0
        #: (topic name, partition id) -> (topic, store, max data length) for the send hot path
        self._send_targets: dict[tuple[str, int], tuple[TopicConf, MessageStore, int]] = {}
        self._transfer = min(config.transfer_size, 2 * C.MAX_TRANSFER_SIZE)
        self._tasks: list[asyncio.Task[None]] = []
        self._running = False
        #: acknowledged sends and the fsync loop of the flush policy
        self.durability = SendDurability(store_manager, config.flush, config.flush_interval_ms)
        #: accepted commits: journaled before they are answered
        self.commits = CommitJournal(self.offsets, config.flush == "always")
        #: test hook: answers to spoil and what the clients did next
        self.faults = FaultInjector()
        #: the admin views (groups, per-partition offsets and lag)
        self.views = BrokerViews(self.registrations, self.offsets, self.catalog)
        meta.on_change.append(self._on_meta_change)

    def _on_meta_change(self) -> None:
        self._send_targets.clear()
        live = {t.name for t in self.catalog.topics()}
        for topic in {k[0] for k in self.stores.stores} | set(self.stores.known_topics_on_disk()):
            if topic not in live:
                self.stores.drop_topic(topic)
                self.offsets.drop_topic(topic)
                self.registrations.drop_topic(topic)

    # ---- helpers

    def _offset(self, key: Key, store: MessageStore) -> int:
        o = self.offsets.get(*key)
        return store.min_offset if o is None else o

    def _next_message_id(self, now_ms: int) -> int:
        mid = now_ms << 20
        if mid <= self._last_mid:
            mid = self._last_mid + 1
        self._last_mid = mid
        return mid

    def _token_ok(self, req: Any, ctx: RpcContext) -> bool:
        """The visit-token check; a wrong token counts towards closing the connection (RpcContext)."""
        check = self.visit_token_check
        if check is None:
            return True
        if check(req.authInfo.visitAuthorizedToken):
            ctx.token_accepted()
            return True
        ctx.token_refused()
        return False

    def _read_allowed(self, ctx: RpcContext) -> bool:
        """getMessage and commit carry no token (the real broker never checks them): with the check on,
        they are served only on a connection that already presented a valid token (register/heartbeat)."""
        return self.visit_token_check is None or ctx.token_verified

    def _read_topic(
        self, req: Any, ctx: RpcContext, unavailable: str, by_token: bool, *names: str
    ) -> tuple[list[str], TopicConf | None, tuple[int, str]]:
        """``_opening`` on the read service, then the topic (the last of ``names``) if deployed here.
        Returns the trimmed values and the topic; with no topic, the (errCode, errMsg) to answer."""
        values, refused = self._opening(req, ctx, self.read_available, unavailable, by_token, *names)
        if refused:
            return values, None, refused
        topic = self.catalog.topic(values[-1])
        return values, topic, (E.FORBIDDEN, _topic_missing(values[-1]))

    def _opening(
        self, req: Any, ctx: RpcContext, available: bool, unavailable: str, by_token: bool, *names: str
    ) -> tuple[list[str], tuple[int, str] | None]:
        """The opening checks every data handler makes in this order: store service up, token (checked
        on this request, or one already presented on the connection), then the named strings
        (_precheck). Returns the trimmed values and, when refused, the (errCode, errMsg) to answer."""
        if not available:
            return [""] * len(names), (E.SERVICE_UNAVAILABLE, unavailable)
        if by_token:
            if self.visit_token_check is not None and not self._token_ok(req, ctx):
                return [""] * len(names), (E.CERTIFICATE_FAILURE, _TOKEN_INVALID)
        elif not self._read_allowed(ctx):
            return [""] * len(names), (E.CERTIFICATE_FAILURE, _TOKEN_UNVERIFIED)
        values, err = _precheck(req, *names)
        return values, (None if err is None else (E.BAD_REQUEST, err))
