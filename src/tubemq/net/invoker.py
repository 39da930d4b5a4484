"""Master RPCs with the Java client's fail-over (docs/PROTOCOL.md §5.0, RpcServiceFailoverInvoker).

The master list is de-duplicated and sorted; calls go to the current master; a StandbyException, a
FATAL answer, an I/O error or a timeout closes that connection and moves to the next master, up to
one attempt per master per call. Any other remote exception is the caller's business and is raised.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any, TypeVar

from ..codec import encode_request
from ..errors import (
    DecodeError,
    NotTubeMQPortError,
    RemoteError,
    StandbyError,
    TubeMQConnectionError,
    TubeMQError,
    TubeMQTimeoutError,
)
from ..protocol.constants import DEFAULT_RPC_TIMEOUT_MS, ServiceType
from .connection import split_address
from .pool import ConnectionPool

log = logging.getLogger("tubemq.net.invoker")

M = TypeVar("M")

#: what a TubeMQ broker answers a master RPC with ("No service 1 found on the server")
NO_SERVICE = f"No service {int(ServiceType.MASTER)} found"


def normalize_master_list(addresses: str | Iterable[str]) -> list[str]:
    """``"h1:p1,h2:p2"`` or a list -> sorted, de-duplicated ``host:port`` strings (validated)."""
    if isinstance(addresses, str):
        items = addresses.split(",")
    else:
        items = [a for item in addresses for a in str(item).split(",")]
    result = set()
    for item in items:
        item = item.strip()
        if not item:
            continue
        host, port = split_address(item)
        result.add(f"{host}:{port}")
    if not result:
        raise TubeMQConnectionError(f"no master address in {addresses!r}")
    return sorted(result)


class MasterInvoker:
    """Round-robin fail-over over the master list; see the module docstring."""

    def __init__(
        self,
        addresses: str | Iterable[str],
        pool: ConnectionPool,
        *,
        timeout_ms: int = DEFAULT_RPC_TIMEOUT_MS,
    ) -> None:
        self.addresses = normalize_master_list(addresses)
        self.pool = pool
        self.timeout_ms = timeout_ms
        #: the first answer on a fresh master connection is awaited this long at most (see _first_call)
        self.first_answer_s = max(5.0, 2 * float(getattr(pool, "connect_timeout", 3.0)))
        #: masters that answered once: a later silence is a paused or overloaded master (retried as
        #: any timeout), not a wrong address
        self._answered: set[str] = set()
        self._index = 0

    @property
    def current_address(self) -> str:
        return self.addresses[self._index % len(self.addresses)]

    def rotate(self) -> str:
        """Move to the next master (used after StandbyException / I/O failures)."""
        self._index = (self._index + 1) % len(self.addresses)
        return self.current_address

    async def call_raw(self, method: int, body: bytes) -> bytes:
        """One master RPC with fail-over; returns the response message bytes."""
        last: TubeMQError | None = None
        for _ in range(len(self.addresses)):
            address = self.current_address
            try:
                conn = await self.pool.get(address)
                if conn.bytes_received == 0 and address not in self._answered:
                    data = await self._first_call(conn, method, body)
                    self._answered.add(address)
                    return data
                return await conn.call(ServiceType.MASTER, method, body, timeout_ms=self.timeout_ms)
            except StandbyError as exc:
                log.info("master %s is a standby, trying the next one", address)
                last = exc
            except RemoteError as exc:
                if NO_SERVICE in exc.message:
                    last = NotTubeMQPortError(
                        f"{address} is a TubeMQ broker port, not a master (it answered {exc.message!r}): "
                        f"give the master's RPC address (usually port 8715)")
                    last.__cause__ = exc
                    log.info("%s", last)
                    await self.pool.discard(address)
                    self.rotate()
                    continue
                if not exc.is_fatal:
                    raise
                log.warning("master %s answered FATAL (%s), trying the next one", address, exc)
                last = exc
            except (TubeMQConnectionError, TubeMQTimeoutError, NotTubeMQPortError) as exc:
                log.info("master %s failed (%s), trying the next one", address, exc)
                last = exc
            await self.pool.discard(address)
            self.rotate()
        assert last is not None
        try:
            raise last
        finally:
            # the traceback keeps this frame: without this, exception -> frame -> exception is a cycle
            # that holds the failed connection (and its buffers) until the cycle collector runs
            last = None

    async def _first_call(self, conn: Any, method: int, body: bytes) -> bytes:
        """The first request to a master that never answered yet, its answer awaited at most
        ``first_answer_s``: a peer that accepted the TCP connection and never sends a byte is not a
        TubeMQ master (a silent port would otherwise hold every attempt for the whole RPC timeout).
        A master that answered before keeps the full timeout and the usual retries."""
        wait_ms = min(self.timeout_ms, int(self.first_answer_s * 1000))
        timeout_ms = self.timeout_ms

        def build(serial: int) -> bytes:  # the request still carries the configured timeout (as Java's)
            return encode_request(serial, ServiceType.MASTER, method, body, timeout_ms=timeout_ms)

        try:
            return await conn.call_frame(build, timeout_ms=wait_ms)  # type: ignore[no-any-return]
        except TubeMQTimeoutError as exc:
            if conn.bytes_received or wait_ms >= self.timeout_ms:
                raise
            raise NotTubeMQPortError(
                f"{conn.address} accepted the connection but sent nothing in {wait_ms / 1000:g} s: not a "
                f"TubeMQ master RPC port? (a TLS port needs tls=True; or a firewall, or another service)"
            ) from exc

    async def call(self, method: int, request: Any, response_cls: type[M]) -> M:
        """Serialise ``request`` (a protobuf message), call with fail-over, parse ``response_cls``."""
        data = await self.call_raw(method, request.SerializeToString())
        try:
            return response_cls.FromString(data)  # type: ignore[attr-defined, no-any-return]
        except Exception as exc:  # protobuf DecodeError / missing required fields
            raise DecodeError(f"bad {response_cls.__name__} from {self.current_address}: {exc}") from exc


__all__ = ["MasterInvoker", "normalize_master_list"]
