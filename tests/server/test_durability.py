"""Durability: 20k acknowledged messages survive a SIGKILL of the server process (issue 3)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tubemq import codec
from tubemq.server.meta import MetaStore

from ._child import ServerChild
from ._raw import RawClient

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")

TOTAL = 20000
PARTITIONS = 3


def produce(address: str, total: int, window: int = 500) -> dict[int, list[int]]:
    """Pipelined raw sends; returns, per partition, the sequence numbers that were acknowledged."""
    acked: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
    with RawClient(address) as c:
        seq = 0
        while seq < total:
            batch = range(seq, min(total, seq + window))
            c.send_raw(b"".join(
                codec.encode_send_request(i + 1, "dura-producer", "dura", i % PARTITIONS, b"seq-%08d" % i, 0, 1, -2)
                for i in batch
            ))
            for i in batch:
                r = c.wait(i + 1)
                assert r.status == 0
                resp = codec.decode_send_response(r.body)
                assert resp.success, resp
                acked[i % PARTITIONS].append(i)
            seq += window
    return acked


def consume_all(address: str, partition: int) -> list[int]:
    out: list[int] = []
    with RawClient(address) as c:
        r = c.register("dura-group", "dura", partition, "dura-consumer", read_status=0)
        assert r.success and r.currOffset == 0
        for _ in range(10000):
            m = c.fetch("dura-group", "dura", partition, "dura-consumer")
            if not m.success:
                assert m.errCode == 404, m
                break
            for x in m.messages:
                assert codec.crc32(x.payLoadData) == x.checkSum
                out.append(int(x.payLoadData[4:]))
    return out


def test_acknowledged_messages_survive_sigkill(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    MetaStore(data_dir).create_topic("dura", partitions=PARTITIONS)
    server = ServerChild(data_dir)
    try:
        acked = produce(server.broker, TOTAL)
    finally:
        server.kill()  # SIGKILL right after the last acknowledgement
    assert sum(len(v) for v in acked.values()) == TOTAL
    server = ServerChild(data_dir)
    try:
        for p in range(PARTITIONS):
            got = consume_all(server.broker, p)
            assert got == acked[p], f"partition {p}: {len(got)} read back, {len(acked[p])} acknowledged"
        assert server.terminate() == 0  # clean SIGTERM shutdown
    finally:
        server.kill()
