"""Links: which connections to brokers presented the consumer's tokens, and what a new one sends first.

Why a module of its own: the broker serves reads only on a connection that presented a valid visit
token (register or heartbeat on it), and a getMessage request carries none. Every driver that fetches
on a connection of its own (the loop's fetch workers, the blocking iterator's channels) opens it through
:class:`Links`, so no route can forget the tokens.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

from ..errors import DecodeError, TubeMQError, error_for_code
from ..protocol import broker_pb
from ..protocol.constants import Method

if TYPE_CHECKING:
    from .brokers import BrokerClient
    from .partitions import PartitionTable

__all__ = ["FETCH_METHOD", "OPENING_METHOD", "Links"]

#: the request a lease's answer comes from
FETCH_METHOD = int(Method.BROKER_CONSUMER_GET_MESSAGE)
#: what a new link writes before its first fetch: a broker heartbeat carrying the visit (and auth) token
OPENING_METHOD = int(Method.BROKER_CONSUMER_HEARTBEAT)



class Links:
    """Which links (connections to brokers) presented the consumer's tokens, and what a new one sends
    first. Shared by the engine and the loop's fetch workers, so both drivers open a link the same way."""

    def __init__(self, table: PartitionTable, brokers: BrokerClient) -> None:
        self.table = table
        self.brokers = brokers
        #: weak: a closed link is forgotten with it
        self._opened: weakref.WeakSet[Any] = weakref.WeakSet()

    def needs_opening(self, link: Any) -> bool:
        """True until :meth:`opened` accepted the answer to this link's :meth:`opening` request."""
        return link not in self._opened

    def opening(self, address: str) -> bytes:
        """The request body a new link to ``address`` writes first (method :data:`OPENING_METHOD`): a
        heartbeat of the partitions held there, with the visit token and (auth configured) the signed
        token, so that the broker serves this link's reads as it does the registering one's."""
        partitions = [s.partition for s in self.table.registered() if s.partition.address == address]
        return self.brokers.heartbeat_request(partitions)

    def opened(self, link: Any, data: bytes | None, exc: BaseException | None) -> TubeMQError | None:
        """Judge the answer to :meth:`opening` (``data``: RspResponseBody.data, or ``exc``). None: the
        link may fetch; else the error, answered to the lease like any failed fetch."""
        if data is None:
            return exc if isinstance(exc, TubeMQError) else TubeMQError(f"opening a link failed: {exc}")
        try:
            rsp = broker_pb.HeartBeatResponseB2C.FromString(data)
        except Exception as err:  # protobuf DecodeError / missing required fields
            return DecodeError(f"bad answer to a link's opening heartbeat: {err}")
        if not rsp.success:
            return error_for_code(rsp.errCode, rsp.errMsg or "broker refused the consumer's tokens")
        self._opened.add(link)
        return None
