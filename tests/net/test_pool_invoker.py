"""ConnectionPool (sharing, back-off, idle recycling) and MasterInvoker (fail-over, §5.0)."""

from __future__ import annotations

import asyncio
import time

import pytest
from _support.ports import dead_address

from tubemq import codec
from tubemq.errors import RemoteError, StandbyError, TubeMQConnectionError
from tubemq.net.invoker import MasterInvoker, normalize_master_list
from tubemq.net.pool import ConnectionPool, PoolSettings
from tubemq.protocol import master_pb
from tubemq.protocol.constants import EXC_STANDBY
from tubemq.server import wire


def test_pool_shares_one_connection_per_address(frame_server, run) -> None:
    async def main() -> None:
        srv = await frame_server()
        pool = ConnectionPool()
        conns = await asyncio.gather(*(pool.get(srv.address) for _ in range(20)))
        assert len({id(c) for c in conns}) == 1
        assert srv.connections == 1
        assert pool.connected(srv.address) is conns[0]
        await conns[0].close()
        again = await pool.get(srv.address)  # reconnects lazily
        assert again is not conns[0] and not again.closed
        assert pool.health(srv.address).connects == 2
        await pool.close()
        assert again.closed
        with pytest.raises(TubeMQConnectionError):
            await pool.get(srv.address)
        await srv.close()

    run(main())


def test_pool_backoff_after_connect_failure(run) -> None:
    async def main() -> None:
        pool = ConnectionPool(PoolSettings(backoff_base=0.2, backoff_max=0.4))
        addr = dead_address()
        with pytest.raises(TubeMQConnectionError):
            await pool.get(addr)
        assert pool.is_backing_off(addr)
        t0 = time.monotonic()
        with pytest.raises(TubeMQConnectionError, match="backing off"):
            await pool.get(addr)
        # fails at once, without a connect attempt (the message says so); the limit only catches a hang
        assert time.monotonic() - t0 < 5
        deadline = time.monotonic() + 5
        while pool.is_backing_off(addr) and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        with pytest.raises(TubeMQConnectionError) as ei:
            await pool.get(addr)  # a real second attempt
        assert "backing off" not in str(ei.value)
        assert pool.health(addr).failures == 2
        await pool.close()

    run(main())


def test_pool_idle_recycling(frame_server, run) -> None:
    async def main() -> None:
        srv = await frame_server()
        pool = ConnectionPool(PoolSettings(idle_timeout=0.2))
        conn = await pool.get(srv.address)
        deadline = time.monotonic() + 5
        while not conn.closed and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert conn.closed and pool.connected(srv.address) is None
        assert not (await pool.get(srv.address)).closed
        await pool.close()
        await srv.close()

    run(main())


def test_shared_pool_is_refcounted(frame_server, run) -> None:
    async def main() -> None:
        a = ConnectionPool.acquire_shared()
        b = ConnectionPool.acquire_shared()
        assert a is b
        srv = await frame_server()
        conn = await a.get(srv.address)
        await a.close()
        assert not conn.closed and not b.closed  # still referenced
        await b.close()
        assert conn.closed and b.closed
        c = ConnectionPool.acquire_shared()
        assert c is not a
        d = ConnectionPool.acquire_shared(PoolSettings(max_inflight=8))  # other settings: another pool
        assert d is not c and d.settings.max_inflight == 8
        await c.close()
        await d.close()
        await srv.close()

    run(main())


def test_normalize_master_list() -> None:
    assert normalize_master_list("b:2, a:1,b:2") == ["a:1", "b:2"]
    assert normalize_master_list(["x:1,y:2", "x:1"]) == ["x:1", "y:2"]
    with pytest.raises(TubeMQConnectionError):
        normalize_master_list(" , ")


def _close_ok(req: codec.Request, serial: int) -> list[bytes]:
    rsp = master_pb.CloseResponseM2P(success=True, errCode=200, errMsg="OK!")
    return [wire.encode_response(serial, req.method, rsp.SerializeToString())]


def test_invoker_fails_over_standby_and_dead_masters(frame_server, run) -> None:
    async def main() -> None:
        standby = await frame_server(
            lambda req, serial: [wire.encode_error_response(serial, EXC_STANDBY, "x is not master now")]
        )
        active = await frame_server(_close_ok)
        dead = dead_address()
        pool = ConnectionPool()
        inv = MasterInvoker([standby.address, dead, active.address], pool, timeout_ms=3000)
        inv._index = inv.addresses.index(standby.address)
        rsp = await inv.call(3, master_pb.CloseRequestP2M(clientId="c"), master_pb.CloseResponseM2P)
        assert rsp.success and rsp.errCode == 200
        assert inv.current_address == active.address
        assert pool.connected(standby.address) is None  # the standby connection was dropped
        # the next call goes straight to the active master
        n = len(standby.requests)
        await inv.call(3, master_pb.CloseRequestP2M(clientId="c"), master_pb.CloseResponseM2P)
        assert len(standby.requests) == n
        await pool.close()
        await standby.close()
        await active.close()

    run(main())


def test_invoker_raises_after_all_masters_fail(frame_server, run) -> None:
    async def main() -> None:
        standby = await frame_server(
            lambda req, serial: [wire.encode_error_response(serial, EXC_STANDBY, "not master")]
        )
        pool = ConnectionPool()
        inv = MasterInvoker([standby.address, dead_address()], pool, timeout_ms=3000)
        with pytest.raises((StandbyError, TubeMQConnectionError)):
            await inv.call(3, master_pb.CloseRequestP2M(clientId="c"), master_pb.CloseResponseM2P)
        await pool.close()
        await standby.close()

    run(main())


def test_invoker_raises_plain_remote_errors_without_failover(frame_server, run) -> None:
    async def main() -> None:
        a = await frame_server(
            lambda req, serial: [wire.encode_error_response(serial, "java.lang.Exception", "No service 2")]
        )
        b = await frame_server(_close_ok)
        pool = ConnectionPool()
        inv = MasterInvoker([a.address, b.address], pool, timeout_ms=3000)
        inv._index = inv.addresses.index(a.address)
        with pytest.raises(RemoteError) as ei:
            await inv.call(3, master_pb.CloseRequestP2M(clientId="c"), master_pb.CloseResponseM2P)
        assert not isinstance(ei.value, StandbyError)
        assert inv.current_address == a.address and not b.requests
        await pool.close()
        await a.close()
        await b.close()

    run(main())
