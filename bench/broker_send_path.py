"""The broker's send path without the network: CPU per acknowledged message, in a fresh process.

Builds the real pieces (``MetaStore``, ``StoreManager``, ``Broker``, ``RpcServer`` with the broker's
batch-end hook) and one connection object whose transport only counts the bytes written, then feeds
it ``--messages`` send frames of ``--size`` bytes in reads of ``--batch`` frames, as a pipelining
producer's reads arrive. Every answer is checked to be a success. Prints microseconds of process CPU
per message (decode, checks, append, the batch's write to the OS, the answer), after checking that
every answer is a success. With ``--flush always``
the reads' answers wait for the group fsync, so the loop runs until all are written.

Why: the end-to-end server bench (bench_server.py) on a shared 2-core machine swings by 2x between
runs; the CPU of the send path in one process is what a change to it can move.

Usage: python bench/broker_send_path.py [--messages 200000] [--size 100] [--batch 500] [--flush interval]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from tubemq import codec
from tubemq.server.broker import Broker
from tubemq.server.config import ServerConfig
from tubemq.server.meta import MetaStore
from tubemq.server.rpc import RpcServer, _Connection
from tubemq.server.storage import StoreManager


class CountingTransport:
    """Just enough of an asyncio transport: counts answers and bytes."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.chunks.append(data)

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default


async def run(args: argparse.Namespace, data_dir: Path) -> float:
    config = ServerConfig(data_dir=data_dir, flush=args.flush, master_port=0, broker_port=0, admin_port=0)
    meta = MetaStore(data_dir)
    meta.create_topic("bench", partitions=1)
    stores = StoreManager(data_dir)
    broker = Broker(config, meta, stores)
    await broker.start()
    server = RpcServer("broker", "127.0.0.1", 0, broker.handlers(), on_batch_end=broker.flush_pending)
    conn = _Connection(server)
    transport = CountingTransport()
    conn.transport = transport  # type: ignore[assignment]
    conn.remote = "127.0.0.1:1"
    payload = b"x" * args.size
    batches = []
    serial = 1
    for start in range(0, args.messages, args.batch):
        frames = []
        for _ in range(min(args.batch, args.messages - start)):
            frames.append(codec.encode_send_request(serial, "bench-p", "bench", 0, payload, 0, 2130706433, -2))
            serial += 1
        batches.append(b"".join(frames))
    t0 = time.process_time()
    for data in batches:
        conn.data_received(data)
        if args.flush == "always":
            while conn.tasks:
                await asyncio.gather(*list(conn.tasks))
    spent = time.process_time() - t0
    assert stores.get("bench", 0).max_offset == args.messages * 28, "not every send was stored"  # type: ignore[union-attr]
    decoder = codec.FrameDecoder()
    answers = [codec.decode_send_response(codec.decode_response(p).body)
               for chunk in transport.chunks for _, p in decoder.feed(chunk)]
    assert len(answers) == args.messages and all(a.success for a in answers), "a send was not acknowledged"
    await broker.stop()
    return spent


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=200000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--flush", default="interval", choices=("always", "interval", "never"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        spent = asyncio.run(run(args, Path(tmp)))
    print(f"flush={args.flush}: {args.messages} sends of {args.size} B in reads of {args.batch}: "
          f"{spent * 1e6 / args.messages:.2f} us CPU per message ({args.messages / spent:,.0f} msg/s of CPU)")


if __name__ == "__main__":
    main()
