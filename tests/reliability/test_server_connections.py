"""Issues 11.7 and 11.8: idle, muted and half-sent connections cannot lock out or exhaust the server.

Every loop here is bounded in count and time; the flood sizes are small multiples of a lowered
``max_connections`` so the test shows the mechanism without thousands of sockets.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _support import needs_proc_fs

import tubemq
from tubemq import codec
from tubemq.protocol import broker_pb
from tubemq.protocol.constants import MAX_LIST_SIZE
from tubemq.server import EmbeddedCluster
from tubemq.server.rpc import RpcServer, frame_limit_for
from tubemq.server.testing import FAST_CLIENT_TIMERS as FAST_TIMERS

CLIENT: dict[str, Any] = {"heartbeat_period_ms": 200, "register_retry_wait_ms": 100, "rpc_timeout_ms": 3000,
                          "connect_timeout_ms": 1000}
CAP = 24
FLOOD = 2 * CAP  # idle connections opened against each port


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def _closed_by_peer(sock: socket.socket, wait: float) -> bool:
    """True when the server closed ``sock`` within ``wait`` seconds (EOF or reset)."""
    sock.settimeout(wait)
    try:
        return sock.recv(1) == b""
    except ConnectionError:
        return True
    except TimeoutError:
        return False


@contextlib.contextmanager
def idle_flood(address: str, count: int) -> Iterator[list[socket.socket]]:
    host, port = address.rsplit(":", 1)
    socks: list[socket.socket] = []
    try:
        for _ in range(count):
            with contextlib.suppress(OSError):
                socks.append(socket.create_connection((host, int(port)), timeout=2))
        yield socks
    finally:
        for s in socks:
            s.close()


def test_idle_flood_does_not_stop_a_producer(tmp_path: Path) -> None:
    with EmbeddedCluster(data_dir=tmp_path / "d", max_connections=CAP, **FAST_TIMERS) as cl:
        cl.create_topic("busy", partitions=1)
        with idle_flood(cl.master_address, FLOOD), idle_flood(cl.broker_address, FLOOD) as broker_socks:
            time.sleep(1.3)  # the flood is now idle for longer than the eviction floor (1 s)
            with tubemq.Producer(cl.master_address, **CLIENT) as p:
                for i in range(10):
                    p.send("busy", b"through the flood %d" % i)
            evicted = sum(_closed_by_peer(s, 0.01) for s in broker_socks)
            assert evicted >= 1
        brk = cl._call(lambda: cl.server.nodes[0].rpc)
        assert brk.connections <= CAP
        assert brk.evicted_connections + brk.rejected_connections >= FLOOD - CAP


def test_idle_connections_are_closed_after_the_idle_timeout(tmp_path: Path) -> None:
    with EmbeddedCluster(data_dir=tmp_path / "d", rpc_idle_timeout_ms=400, **FAST_TIMERS) as cl:
        cl.create_topic("quiet", partitions=1)
        with idle_flood(cl.broker_address, 3) as socks:
            assert all(_closed_by_peer(s, 5) for s in socks)
        # a producer idle past the timeout reconnects and keeps sending
        with tubemq.Producer(cl.master_address, **CLIENT) as p:
            p.send("quiet", b"before")
            time.sleep(1.2)
            p.send("quiet", b"after")


def test_muted_connection_is_closed(tmp_path: Path) -> None:
    with EmbeddedCluster(data_dir=tmp_path / "d", rpc_muted_close_ms=300, **FAST_TIMERS) as cl:
        host, port = cl.broker_address.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=2) as s:
            s.sendall(struct.pack(">III", codec.BEGIN_TOKEN, 1, 0))  # list size 0 mutes (Java: forever)
            assert _closed_by_peer(s, 5)


def _hold_partial_frame(address: str, total: int) -> tuple[socket.socket, int, bool]:
    """Open a connection and stream one never-finished frame of up to ``total`` bytes.

    Returns (socket, bytes the server took, whether the server closed the connection).
    """
    host, port = address.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=5)
    blocks = MAX_LIST_SIZE
    header = struct.pack(">III", codec.BEGIN_TOKEN, 7, blocks)
    block = struct.pack(">I", codec.MAX_BLOCK_SIZE) + b"\0" * codec.MAX_BLOCK_SIZE
    sent = 0
    try:
        s.sendall(header)
        deadline = time.monotonic() + 20
        while sent < total and time.monotonic() < deadline:
            s.sendall(block * 16)
            sent += len(block) * 16
    except OSError:
        return s, sent, True
    return s, sent, _closed_by_peer(s, 2)


@needs_proc_fs
def test_partial_frames_are_bounded_per_connection(tmp_path: Path) -> None:
    """12 connections each holding a half-sent 4 MB frame: 27.7 MB of RSS each before the fix."""
    with EmbeddedCluster(data_dir=tmp_path / "d", **FAST_TIMERS) as cl:
        cl.create_topic("small", partitions=1)
        limit = frame_limit_for(cl.server.config.default_max_msg_size)
        rss0 = _rss_bytes()
        held = [_hold_partial_frame(cl.broker_address, 4 << 20) for _ in range(12)]
        try:
            assert all(closed for _, _, closed in held), [sent for _, sent, _ in held]
            growth = _rss_bytes() - rss0
            brk = cl._call(lambda: cl.server.nodes[0].rpc)
            assert brk.partial_bytes <= 12 * limit
            assert brk.closed_oversize >= 12
            assert growth < 12 * limit + (32 << 20), growth
        finally:
            for s, _, _ in held:
                s.close()
        # a legal large message on a topic with a larger limit still goes through in one frame
        cl.create_topic("large", partitions=1, max_msg_size=4 << 20)
        time.sleep(1.1)  # the frame limit is recomputed at most once a second
        host, port = cl.broker_address.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as s:
            s.sendall(codec.encode_send_request(1, "p", "large", 0, b"L" * (3 << 20), 0, 0, -2))
            dec = codec.FrameDecoder()
            frames: list[tuple[int, bytes]] = []
            while not frames:
                data = s.recv(1 << 16)
                assert data, "server closed a legal large send"
                frames = dec.feed(data)
            resp = broker_pb.SendMessageResponseB2P.FromString(codec.decode_response(frames[0][1]).body)
            assert resp.success, resp.errMsg


def test_partial_frames_share_a_global_budget() -> None:
    """Over the budget the stalled holders are closed, most stalled first, and the total stays bounded."""

    async def main() -> None:
        srv = RpcServer("t", "127.0.0.1", 0, {}, frame_limit=lambda: 1 << 20, partial_frames_budget=3 << 20)
        await srv.start()
        loop = asyncio.get_running_loop()
        socks: list[socket.socket] = []
        try:
            for _ in range(5):
                s = socket.create_connection(("127.0.0.1", srv.port))
                s.setblocking(False)
                header = struct.pack(">III", codec.BEGIN_TOKEN, 1, 200)
                block = struct.pack(">I", 8192) + b"\0" * 8192
                await loop.sock_sendall(s, header + block * 100)  # ~800 KiB each, under the per-frame limit
                socks.append(s)
                for _ in range(100):
                    await asyncio.sleep(0.01)
                    if srv.partial_bytes >= sum(1 for _ in socks) * 100 * 8192 or srv.closed_oversize:
                        break
            assert srv.partial_bytes <= 3 << 20
            assert srv.closed_oversize >= 1
            assert srv.connections < 5
        finally:
            for s in socks:
                s.close()
            await srv.stop()

    asyncio.run(asyncio.wait_for(main(), 30))


@pytest.mark.parametrize("bad", [0, -1])
def test_bound_settings_are_validated(tmp_path: Path, bad: int) -> None:
    from tubemq.errors import ConfigError

    for name in ("rpc_idle_timeout_ms", "rpc_muted_close_ms", "max_bad_visit_tokens"):
        with pytest.raises(ConfigError, match=name):
            EmbeddedCluster(data_dir=tmp_path / "d", **{name: bad})
    with pytest.raises(ConfigError, match="rpc_partial_frames_budget"):
        EmbeddedCluster(data_dir=tmp_path / "d", rpc_partial_frames_budget=1 << 20)
