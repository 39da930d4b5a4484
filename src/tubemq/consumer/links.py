"""Links: which connections to brokers presented the consumer's tokens, and what a new one sends first.

Why a module of its own: the broker serves reads only on a connection that presented a valid visit
token (register or heartbeat on it), and a getMessage request carries none. Every driver that fetches
on a connection of its own (the loop's fetch workers, the blocking iterator's channels) opens it through
:class:`Links`, so no route can forget the tokens.
"""

from __future__ import annotations

import weakref
from typing import Any

from ..errors import DecodeError, TubeMQError, error_for_code
from ..protocol import broker_pb
from ..protocol.constants import Method

__all__ = ["FETCH_METHOD", "OPENING_METHOD", "Links"]

#: the request a lease's answer comes from
FETCH_METHOD = int(Method.BROKER_CONSUMER_GET_MESSAGE)
#: what a new link writes before its first fetch: a broker heartbeat carrying the visit (and auth) token
OPENING_METHOD = int(Method.BROKER_CONSUMER_HEARTBEAT)



class Links:
    """Which links (connections to brokers) presented the consumer's tokens: one a register or heartbeat
    was accepted on (:meth:`presented`), or one opened by :meth:`opened`. Shared by the broker calls and
    every fetch driver, so no driver fetches on a link the broker would refuse, and a link that already
    presented them (the registering one) sends nothing more than the Java client does."""

    def __init__(self) -> None:
        #: weak: a closed link is forgotten with it
        self._opened: weakref.WeakSet[Any] = weakref.WeakSet()

    def needs_opening(self, link: Any) -> bool:
        """True until the broker accepted the consumer's tokens on this link."""
        return link not in self._opened

    def presented(self, link: Any) -> None:
        """A request carrying the tokens (register, heartbeat) was accepted on ``link``."""
        self._opened.add(link)

    def opened(self, link: Any, data: bytes | None, exc: BaseException | None) -> TubeMQError | None:
        """Judge the answer to an opening heartbeat (``data``: RspResponseBody.data, or ``exc``). None:
        the link may fetch; else the error, answered to the lease like any failed fetch."""
        if data is None:
            return exc if isinstance(exc, TubeMQError) else TubeMQError(f"opening a link failed: {exc}")
        try:
            rsp = broker_pb.HeartBeatResponseB2C.FromString(data)
        except Exception as err:  # protobuf DecodeError / missing required fields
            return DecodeError(f"bad answer to a link's opening heartbeat: {err}")
        if not rsp.success:
            return error_for_code(rsp.errCode, rsp.errMsg or "broker refused the consumer's tokens")
        self.presented(link)
        return None
