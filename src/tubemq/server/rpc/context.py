"""The types an RPC connection and its server share: the request context, what a handler returns, and
what a connection asks of its server; a home below both, so neither imports the other for annotations."""

from __future__ import annotations

import ssl as _ssl
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, Union

from google.protobuf.message import Message

if TYPE_CHECKING:
    from ..auth import FailureThrottle
    from .envelope import RpcException


class ConnectionState(Protocol):
    """The visit-token state of one connection, as a request context reads and changes it."""

    token_verified: bool

    def bad_token(self) -> None: ...


#: What a handler may return: a protobuf message, pre-serialized response bytes, or an awaitable of those.
HandlerResult = Union[Message, bytes, bytearray, memoryview]  # noqa: UP007 - runtime alias on 3.10


#: The batch-end hook: called after the frames of one read were handled and before their answers are
#: written; it may return replacements (serial -> (context, answer)) for answers already made, e.g. the
#: broker's acknowledgements of sends whose write to the store failed (an RpcException: an exception answer).
BatchEnd = Callable[[], "Mapping[int, tuple[RpcContext, HandlerResult | RpcException]] | None"]

Handler = Callable[[Any, "RpcContext"], Union[HandlerResult, Awaitable[HandlerResult]]]  # noqa: UP007


@dataclass(slots=True, eq=False)
class RpcContext:
    """Per-request facts a handler may need (peer, port, TLS, timing)."""

    serial: int
    service_type: int
    protocol_ver: int
    method: int
    timeout_ms: int
    remote: str
    local_port: int
    tls: bool
    received_at: float
    connection: ConnectionState | None = None

    @property
    def remote_host(self) -> str:
        return self.remote.rsplit(":", 1)[0]

    @property
    def token_verified(self) -> bool:
        """True once a request on this connection presented a valid visit token."""
        conn = self.connection
        return conn is not None and conn.token_verified

    def token_accepted(self) -> None:
        """A valid visit token arrived: token-less requests (getMessage, commit) may use the connection."""
        if self.connection is not None:
            self.connection.token_verified = True

    def token_refused(self) -> None:
        """A wrong visit token arrived: the connection is closed after ``max_bad_tokens`` of them."""
        if self.connection is not None:
            self.connection.bad_token()


class ConnectionOwner(Protocol):
    """What a connection asks of the server that accepted it (``RpcServer``)."""

    name: str
    ssl: _ssl.SSLContext | None
    max_frame: int
    max_inflight: int
    max_buffered: int
    max_bad_tokens: int
    partial_bytes: int
    throttle: FailureThrottle | None
    on_batch_end: BatchEnd | None
    _conns: set[Any]

    def admit(self, conn: Any) -> bool: ...

    def account_partial(self, conn: Any, held: int) -> None: ...

    def process(self, conn: Any, serial: int, payload: bytes) -> bytes | None: ...

    def replace_answers(self, out: list[bytes], replaced: Mapping[int, tuple[RpcContext, HandlerResult]]) -> list[bytes]: ...

    async def finish_async(self, ctx: RpcContext, awaitable: Awaitable[HandlerResult]) -> bytes | None: ...
