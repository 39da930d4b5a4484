"""Producer test helpers: read back what the broker stored (raw broker RPCs over real TCP)."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Iterable
from typing import Any

import pytest

from tubemq import codec
from tubemq.net.connection import Connection
from tubemq.protocol import broker_pb
from tubemq.protocol.constants import MSG_OPTYPE_REGISTER, ServiceType

_groups = itertools.count()


async def _read_partition(conn: Connection, topic: str, pid: int, limit: int) -> list[codec.Message]:
    group = f"readback{next(_groups)}x{int(time.time() * 1000) % 100000}"
    cid = f"{group}_127.0.0.1-1-1-1-Pull-py-test"
    reg = broker_pb.RegisterRequestC2B(
        opType=MSG_OPTYPE_REGISTER, clientId=cid, groupName=group, topicName=topic, partitionId=pid,
        readStatus=0, currOffset=0, qryPriorityId=-2, authInfo=broker_pb.AuthorizedInfo(visitAuthorizedToken=-2),
    )
    rsp = broker_pb.RegisterResponseB2C.FromString(
        await conn.call(ServiceType.BROKER_READ, 15, reg.SerializeToString(), timeout_ms=10000)
    )
    assert rsp.success, (rsp.errCode, rsp.errMsg)
    out: list[codec.Message] = []
    first = True
    empty = 0
    for _ in range(limit):
        req = broker_pb.GetMessageRequestC2B(
            clientId=cid, partitionId=pid, groupName=group, topicName=topic, lastPackConsumed=not first,
            manualCommitOffset=False, escFlowCtrl=False,
        )
        first = False
        body = await conn.call(ServiceType.BROKER_READ, 17, req.SerializeToString(), timeout_ms=10000)
        res = codec.decode_get_message_response(body, topic)
        if res.success and res.messages:
            out.extend(res.messages)
            empty = 0
            continue
        empty += 1
        if (not res.success and res.err_code == 404) or empty > 3:
            break
    return out


def read_stored(broker_address: str, topic: str, partition_ids: Iterable[int], limit: int = 10000
                ) -> dict[int, list[codec.Message]]:
    """Every message stored in the given partitions, by partition id (a fresh group each time)."""

    async def main() -> dict[int, list[codec.Message]]:
        conn = await Connection.open(broker_address)
        try:
            return {pid: await _read_partition(conn, topic, pid, limit) for pid in partition_ids}
        finally:
            await conn.close()

    async def guarded() -> dict[int, list[codec.Message]]:
        return await asyncio.wait_for(main(), 60)

    return asyncio.run(guarded())


def wait_for(cond: Callable[[], Any], timeout: float = 10.0, interval: float = 0.02) -> Any:
    """Poll ``cond`` until truthy (bounded); returns its value or fails the test."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {timeout} s")
        time.sleep(interval)


@pytest.fixture
def stored() -> Callable[..., dict[int, list[codec.Message]]]:
    return read_stored


@pytest.fixture
def poll() -> Callable[..., Any]:
    return wait_for


class Relay:
    """A TCP relay 127.0.0.1:port -> upstream that records every client request (method, body).

    Runs on its own event-loop thread; ``requests`` is a list of (monotonic time, Request).
    """

    def __init__(self, upstream: str) -> None:
        from tubemq.net.loop import LoopThread

        self.upstream = upstream
        self.requests: list[tuple[float, codec.Request]] = []
        self._lt = LoopThread("test-relay")
        self._server: asyncio.AbstractServer | None = None
        self._writers: list[asyncio.StreamWriter] = []
        self.address = self._lt.run(self._start(), timeout=10)

    async def _start(self) -> str:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return f"127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        host, port = self.upstream.rsplit(":", 1)
        try:
            up_r, up_w = await asyncio.open_connection(host, int(port))
        except OSError:
            writer.close()
            return
        self._writers += [writer, up_w]
        dec = codec.FrameDecoder()

        async def c2s() -> None:
            while data := await reader.read(65536):
                for _serial, payload in dec.feed(data):
                    self.requests.append((time.monotonic(), codec.decode_request(payload)))
                up_w.write(data)
            up_w.close()

        async def s2c() -> None:
            while data := await up_r.read(65536):
                writer.write(data)
            writer.close()

        try:
            await asyncio.gather(c2s(), s2c())
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()
            up_w.close()

    def methods(self) -> list[int]:
        return [r.method for _, r in self.requests]

    def close(self) -> None:
        async def stop() -> None:
            for w in self._writers:
                w.transport.abort()
            if self._server is not None:
                self._server.close()

        try:
            self._lt.run(stop(), timeout=10)
        finally:
            self._lt.stop()


@pytest.fixture
def relay() -> Any:
    relays: list[Relay] = []

    def make(upstream: str) -> Relay:
        r = Relay(upstream)
        relays.append(r)
        return r

    yield make
    for r in relays:
        r.close()
