"""Producer test helpers: read back what the broker stored (raw broker RPCs over real TCP)."""

from __future__ import annotations

import asyncio
import itertools
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
from _support import wait_for

from tubemq import codec
from tubemq.net.connection import Connection
from tubemq.protocol import broker_pb
from tubemq.protocol.constants import MSG_OPTYPE_REGISTER, ServiceType
from tubemq.server import wire

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
                    self.requests.append((time.monotonic(), wire.decode_request(payload)))
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


# ---------------------------------------------------------------------------------------------------
# a scripted fake master + brokers (for failure paths the embedded server cannot be made to produce)

sys.path.insert(0, str(Path(__file__).parent.parent / "net"))

from frameserver import FrameServer  # noqa: E402

from tubemq.protocol import master_pb  # noqa: E402
from tubemq.protocol.constants import EXC_STANDBY  # noqa: E402


class FakeBroker:
    """Answers send requests from a script: codes to return in order (then 200), or "drop"/"close"."""

    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self.script: list[int | str] = []
        self.sends: list[broker_pb.SendMessageRequestP2B] = []
        self.server: FrameServer | None = None
        self._next_id = broker_id * 1_000_000

    def handle(self, req: codec.Request, serial: int) -> list[bytes] | None:
        msg = broker_pb.SendMessageRequestP2B.FromString(req.body)
        self.sends.append(msg)
        action = self.script.pop(0) if self.script else 200
        if action == "drop":
            return None
        if action == "close":
            for w in list(self.server.writers):  # type: ignore[union-attr]
                w.transport.abort()
            return None
        if action == 200:
            self._next_id += 1
            rsp = broker_pb.SendMessageResponseB2P(
                success=True, errCode=200, errMsg=str(self._next_id), requireAuth=False, messageId=self._next_id,
                appendTime=1700000000000, appendOffset=28 * len(self.sends),
            )
        else:
            rsp = broker_pb.SendMessageResponseB2P(success=False, errCode=int(action), errMsg=f"scripted {action}")
        return [wire.encode_response(serial, 13, rsp.SerializeToString())]


class FakeMaster:
    """Producer register/heartbeat/close; topic -> partitions per broker; can turn standby."""

    def __init__(self, brokers: list[FakeBroker], topics: dict[str, int]) -> None:
        self.brokers = brokers
        self.topics = topics
        self.standby = False
        self.known: set[str] = set()
        self.requests: list[tuple[int, Any]] = []
        self.auth_token = ""
        self.visit_token = 4242
        self.checksum = 1
        self.server: FrameServer | None = None

    def handle(self, req: codec.Request, serial: int) -> list[bytes] | None:
        cls = {1: master_pb.RegisterRequestP2M, 2: master_pb.HeartRequestP2M, 3: master_pb.CloseRequestP2M}[req.method]
        msg = cls.FromString(req.body)
        self.requests.append((req.method, msg))
        if self.standby:
            return [wire.encode_error_response(serial, EXC_STANDBY, "fake is not master now")]
        auth = master_pb.MasterAuthorizedInfo(visitAuthorizedToken=self.visit_token)
        if self.auth_token:
            auth.authAuthorizedToken = self.auth_token
        infos = [f"{b.broker_id}:127.0.0.1:{b.server.address.rsplit(':', 1)[1]}" for b in self.brokers]  # type: ignore
        if req.method == 1:
            self.known.add(msg.clientId)
            rsp = master_pb.RegisterResponseM2P(
                success=True, errCode=200, errMsg="OK!", brokerCheckSum=self.checksum, brokerInfos=infos,
                authorizedInfo=auth, appdConfig=master_pb.ApprovedClientConfig(configId=-2),
            )
        elif req.method == 2:
            if msg.clientId not in self.known:
                rsp = master_pb.HeartResponseM2P(success=False, errCode=411, errMsg="unknown", brokerCheckSum=-1)
            else:
                topic_infos = [
                    f"{t}#" + ",".join(f"{b.broker_id}:{n}:1" for b in self.brokers) + "#"
                    for t, n in self.topics.items() if t in msg.topicList
                ]
                rsp = master_pb.HeartResponseM2P(
                    success=True, errCode=200, errMsg="OK!", brokerCheckSum=self.checksum, topicInfos=topic_infos,
                    brokerInfos=infos if msg.brokerCheckSum != self.checksum else [], authorizedInfo=auth,
                    appdConfig=master_pb.ApprovedClientConfig(configId=-2),
                )
        else:
            self.known.discard(msg.clientId)
            rsp = master_pb.CloseResponseM2P(success=True, errCode=200, errMsg="OK!")
        return [wire.encode_response(serial, req.method, rsp.SerializeToString())]


class FakeCluster:
    """N fake masters sharing M fake brokers, served from a private event-loop thread."""

    def __init__(self, masters: int = 1, brokers: int = 1, topics: dict[str, int] | None = None) -> None:
        from tubemq.net.loop import LoopThread

        self.lt = LoopThread("fake-cluster")
        self.brokers = [FakeBroker(i + 1) for i in range(brokers)]
        self.masters = [FakeMaster(self.brokers, topics or {"demo": 2}) for _ in range(masters)]

        async def start() -> None:
            for node in [*self.brokers, *self.masters]:
                node.server = await FrameServer(node.handle).start()

        self.lt.run(start(), timeout=10)

    @property
    def master_list(self) -> str:
        return ",".join(m.server.address for m in self.masters)  # type: ignore[union-attr]

    def close(self) -> None:
        async def stop() -> None:
            for node in [*self.brokers, *self.masters]:
                if node.server is not None:
                    await node.server.close()

        try:
            self.lt.run(stop(), timeout=10)
        finally:
            self.lt.stop()


@pytest.fixture
def fake_cluster() -> Any:
    made: list[FakeCluster] = []

    def make(**kwargs: Any) -> FakeCluster:
        c = FakeCluster(**kwargs)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


# ---------------------------------------------------------------------------------------------------
# one set of behaviour tests for both APIs (like tests/codec/conftest.py runs every codec test twice)


class SyncProducerApi:
    """``tubemq.Producer`` seen from a coroutine: every blocking call runs on a worker thread."""

    name = "sync"

    def __init__(self, p: Any) -> None:
        self.p = p

    @classmethod
    async def open(cls, master: str, **options: Any) -> SyncProducerApi:
        import tubemq

        return cls(await asyncio.to_thread(tubemq.Producer, master, **options))

    @property
    def core(self) -> Any:
        return self.p._aio._core

    async def send(self, topic: str, data: Any, **kw: Any) -> Any:
        return await asyncio.to_thread(self.p.send, topic, data, **kw)

    async def send_async(self, topic: str, data: Any, **kw: Any) -> asyncio.Future[Any]:
        """The message's future (a concurrent one, wrapped to be awaited here)."""
        fut = await asyncio.to_thread(self.p.send_async, topic, data, **kw)
        return asyncio.wrap_future(fut)

    async def flush(self, timeout: float = 10.0) -> int:
        return int(await asyncio.to_thread(self.p.flush, timeout))

    async def close(self) -> None:
        await asyncio.to_thread(self.p.close)

    async def __aenter__(self) -> SyncProducerApi:
        await asyncio.to_thread(self.p.__enter__)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.p.__exit__, None, None, None)

    def metrics(self) -> dict[str, Any]:
        return dict(self.p.metrics())

    @property
    def closed(self) -> bool:
        return bool(self.p.closed)

    def forget(self) -> None:
        self.p = None


class AioProducerApi(SyncProducerApi):
    """``tubemq.aio.Producer`` on the test's own loop."""

    name = "aio"

    @classmethod
    async def open(cls, master: str, **options: Any) -> SyncProducerApi:
        import tubemq.aio

        return cls(await tubemq.aio.Producer(master, **options).start())

    @property
    def core(self) -> Any:
        return self.p._core

    async def send(self, topic: str, data: Any, **kw: Any) -> Any:
        return await self.p.send(topic, data, **kw)

    async def send_async(self, topic: str, data: Any, **kw: Any) -> asyncio.Future[Any]:
        return await self.p.send_async(topic, data, **kw)  # type: ignore[no-any-return]

    async def flush(self, timeout: float = 10.0) -> int:
        return int(await self.p.flush(timeout))

    async def close(self) -> None:
        await self.p.close()

    async def __aenter__(self) -> SyncProducerApi:
        await self.p.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.p.__aexit__(None, None, None)


@pytest.fixture(params=[SyncProducerApi, AioProducerApi], ids=["sync", "aio"])
def producer_api(request: Any) -> type[SyncProducerApi]:
    """The blocking ``tubemq.Producer`` or ``tubemq.aio.Producer``, behind one awaitable interface."""
    return request.param  # type: ignore[no-any-return]
