"""One sitting, one broker: the consumer's routes against a raw fetch loop (the consume counterpart of
``roundtrip.py``).

Why: a consume figure swings with the machine as much as a send figure, so the consumer is judged
against a reference drained in the same run from the same backlog on the same broker: ``raw``, the least
a Python client does per batch. Paths, each draining ``--messages`` from the earliest offset in a fresh
group (``--rounds`` times, alternating):

* ``raw``      the reference: a consumer group member registered with the master and the broker by a
               ``tubemq.Consumer`` (paused, so it fetches nothing itself; it keeps heartbeating), whose
               client id a plain blocking socket per partition then uses: getMessage frames encoded in
               advance (``lastPackConsumed`` true: the commit rides on the next fetch, as the iterator
               confirms), one fetch in flight per partition (what the broker allows), answers read as
               they arrive (``select.poll``), unwrapped and decoded by the codec like the consumer's, every
               message's data touched; at the end a pre-encoded commit per partition;
* ``iterate``  ``for msg in tubemq.Consumer`` (the blocking iterator, its own fetches on this thread);
* ``poll``     ``tubemq.Consumer.poll()`` + ``confirm(batch)``;
* ``aio``      ``async for msg in tubemq.aio.Consumer``;
* ``listener`` ``tubemq.Consumer.subscribe(listener, batch=True)`` (push, a dispatcher thread).

Every client path runs with the same options (``--concurrency`` fetches, ``confirm_in_local``). The clock
starts when the partitions are assigned (the ``on_partitions_assigned`` hook, on the consumer's loop, for
every path: registration and the rebalance wait excluded, whatever a path prefetches meanwhile included)
and stops at the N-th message; CPU is this process's (every thread, ``time.process_time``) over the same
span, per million messages. The broker is an embedded server in a child process (its own core).

Usage: python bench/consume_roundtrip.py [--messages 300000] [--size 100] [--rounds 2] [--stores 4]
       [--concurrency 4] [--paths raw,iterate,poll,aio,listener]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import select
import socket
import sys
import tempfile
import threading
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_consumer import load  # noqa: E402
from bench_server import create_topic, embedded_server  # noqa: E402
from roundtrip import report, summary  # noqa: E402

import tubemq  # noqa: E402
import tubemq.aio  # noqa: E402
from tubemq import codec  # noqa: E402
from tubemq.consumer.fetch import get_message_request  # noqa: E402
from tubemq.net.connection import unwrap_response  # noqa: E402
from tubemq.protocol import broker_pb  # noqa: E402
from tubemq.protocol.constants import ErrorCode, Method, ServiceType  # noqa: E402

PATHS = ("raw", "iterate", "poll", "aio", "listener")
#: pre-encoded getMessage frames per partition (serials 1..RING): a serial is only echoed back
RING = 64


def options(args: argparse.Namespace) -> dict[str, Any]:
    """The consumer options of every path (the raw path's registering member too)."""
    return {"consume_from": "earliest", "fetch_concurrency": args.concurrency,
            "prefetch_batches": 2 * args.concurrency, "confirm_in_local": True, "heartbeat_period_ms": 2000}


class Window:
    """Assignment to the N-th message: wall and this process's CPU."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.got = 0
        self.t0 = self.c0 = 0.0
        self.t1 = self.c1 = 0.0
        self.started = threading.Event()
        self.done = threading.Event()

    async def assigned(self, partitions: list[Any]) -> None:
        """The ``on_partitions_assigned`` hook (a coroutine: run on the loop, by every path alike)."""
        if partitions and not self.started.is_set():
            self.t0, self.c0 = time.perf_counter(), time.process_time()
            self.started.set()

    def add(self, count: int) -> bool:
        """``count`` more messages; True once N arrived."""
        self.got += count
        if self.got >= self.n and not self.done.is_set():
            self.t1, self.c1 = time.perf_counter(), time.process_time()
            self.done.set()
        return self.got >= self.n

    def row(self, path: str) -> dict[str, Any]:
        if not self.done.is_set() or not self.started.is_set():
            raise SystemExit(f"{path}: stalled at {self.got} of {self.n}")
        return report(path, self.got, self.t1 - self.t0, self.c1 - self.c0, [])


class RawFetchLoop:
    """The reference: one plain blocking socket per partition under a registered member's client id."""

    def __init__(self, client_id: str, group: str, partitions: list[Any], rpc_timeout_ms: int) -> None:
        self.parts = partitions
        self.socks: list[socket.socket] = []
        self.decoders: list[Any] = []
        self.frames: list[list[bytes]] = []
        self.first: list[bytes] = []
        self.commits: list[bytes] = []
        self.sent = [0] * len(partitions)
        for p in partitions:
            def frame(serial: int, method: int, body: bytes) -> bytes:
                return codec.encode_request(serial, ServiceType.BROKER_READ, method, body, timeout_ms=rpc_timeout_ms)

            fetch = get_message_request(client_id, group, p, True)
            self.frames.append([frame(s, Method.BROKER_CONSUMER_GET_MESSAGE, fetch) for s in range(1, RING + 1)])
            self.first.append(frame(RING + 1, Method.BROKER_CONSUMER_GET_MESSAGE,
                                    get_message_request(client_id, group, p, False)))
            commit = broker_pb.CommitOffsetRequestC2B(clientId=client_id, topicName=p.topic, partitionId=p.partition_id,
                                                      groupName=group, lastPackConsumed=True).SerializeToString()
            self.commits.append(frame(RING + 2, Method.BROKER_CONSUMER_COMMIT, commit))
            sock = socket.create_connection((p.host, p.port), timeout=10)
            sock.settimeout(None)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.socks.append(sock)
            self.decoders.append(codec.FrameDecoder())
        #: one read buffer for every socket: a fresh 256 KiB bytes per recv costs an mmap and a munmap
        self.buf = bytearray(256 * 1024)
        self.view = memoryview(self.buf)

    def _answer(self, i: int) -> bytes:
        """The next whole answer on partition ``i``'s socket, unwrapped (RspResponseBody.data)."""
        sock, decoder, view = self.socks[i], self.decoders[i], self.view
        while True:
            n = sock.recv_into(self.buf)
            if not n:
                raise SystemExit(f"raw: the broker closed partition {self.parts[i]}'s socket")
            got = decoder.feed(view[:n])
            if got:
                return unwrap_response(got[0][1])

    def drain(self, window: Window) -> None:
        poller = select.poll()
        index = {}
        for i, sock in enumerate(self.socks):
            index[sock.fileno()] = i
            poller.register(sock, select.POLLIN)
            sock.sendall(self.first[i])
        decode, success, not_found = codec.decode_get_message_response, ErrorCode.SUCCESS, ErrorCode.NOT_FOUND
        while not window.done.is_set():
            ready = poller.poll(10000)
            if not ready:
                raise SystemExit(f"raw: no answer within 10 s at {window.got} of {window.n}")
            for fd, _ in ready:
                i = index[fd]
                res = decode(self._answer(i), self.parts[i].topic, self.parts[i])
                if res.err_code == success:
                    nbytes = 0
                    for m in res.messages:
                        nbytes += len(m.data)
                    window.add(len(res.messages))
                elif res.err_code != not_found:
                    time.sleep(max(res.min_limit_time, 50) / 1000.0)  # flow control or a transient error
                n = self.sent[i] = self.sent[i] + 1
                self.socks[i].sendall(self.frames[i][n % RING])
        for i, sock in enumerate(self.socks):  # the fetch in flight, then the last batch's commit
            self._answer(i)
            sock.sendall(self.commits[i])
            self._answer(i)

    def close(self) -> None:
        for sock in self.socks:
            sock.close()


def drain_raw(master: str, group: str, topic: str, n: int, expected: int, args: argparse.Namespace) -> dict[str, Any]:
    window = Window(n)
    with tubemq.Consumer(master, group=group, topics=[topic], on_partitions_assigned=window.assigned,
                         **options(args)) as c:
        c.pause()  # registered and heartbeating, fetching nothing: the raw loop fetches for it
        c.poll(0.0)  # starts it: register with the master, then the broker once partitions are assigned
        if not window.started.wait(30):
            raise SystemExit("raw: no partitions assigned within 30 s")
        deadline = time.monotonic() + 30
        while len(c.assignment()) < expected:
            if time.monotonic() > deadline:
                raise SystemExit(f"raw: {len(c.assignment())} of {expected} partitions assigned after 30 s")
            time.sleep(0.001)
        raw = RawFetchLoop(c._aio.client_id, group, c.assignment(), c.config.rpc_timeout_ms)
        try:
            raw.drain(window)
        finally:
            raw.close()
    return window.row("raw")


def drain_sync(master: str, group: str, topic: str, n: int, mode: str, args: argparse.Namespace) -> dict[str, Any]:
    window = Window(n)
    with tubemq.Consumer(master, group=group, topics=[topic], on_partitions_assigned=window.assigned,
                         **options(args)) as c:
        if mode == "iterate":
            nbytes = 0
            for msg in c:
                nbytes += len(msg.data)
                if window.add(1):
                    break
        elif mode == "poll":
            while not window.done.is_set():
                batch = c.poll(10.0)
                if batch is None:
                    raise SystemExit(f"poll: stalled at {window.got} of {n}")
                nbytes = 0
                for msg in batch:
                    nbytes += len(msg.data)
                window.add(len(batch))
                c.confirm(batch)
        else:
            def listener(batch: Any) -> None:
                nbytes = 0
                for msg in batch:
                    nbytes += len(msg.data)
                window.add(len(batch))

            c.subscribe(listener, batch=True)
            if not window.done.wait(120):
                raise SystemExit(f"listener: stalled at {window.got} of {n}")
    return window.row(mode)


async def drain_aio(master: str, group: str, topic: str, n: int, args: argparse.Namespace) -> dict[str, Any]:
    window = Window(n)
    async with tubemq.aio.Consumer(master, group=group, topics=[topic], on_partitions_assigned=window.assigned,
                         **options(args)) as c:
        nbytes = 0
        async for msg in c:
            nbytes += len(msg.data)
            if window.add(1):
                break
    return window.row("aio")


def sitting(master: str, topic: str, expected: int, args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    paths = [p for p in args.paths.split(",") if p]
    # one untimed drain first: every timed path then finds the broker's files and caches alike
    print(f"# warm-up: {json.dumps(drain_raw(master, 'g_warm_up', topic, args.messages, expected, args))}", flush=True)
    for rnd in range(args.rounds):
        for path in paths:
            group = f"g_{path}_{rnd}"
            if path == "raw":
                row = drain_raw(master, group, topic, args.messages, expected, args)
            elif path == "aio":
                row = asyncio.run(drain_aio(master, group, topic, args.messages, args))
            else:
                row = drain_sync(master, group, topic, args.messages, path, args)
            row["round"] = rnd
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=300000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--partitions", type=int, default=1)
    ap.add_argument("--stores", type=int, default=4)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--paths", default=",".join(PATHS))
    args = ap.parse_args()
    print(f"# tubemq {tubemq.__version__} codec={codec.implementation} python={sys.version.split()[0]} "
          f"messages={args.messages} size={args.size} rounds={args.rounds} concurrency={args.concurrency} "
          f"load={os.getloadavg()[0]:.1f}", flush=True)
    with tempfile.TemporaryDirectory() as d, embedded_server(d, "--balance-period-ms", "200") as (mport, bport, aport):
        topic = "consume"
        pids = create_topic(aport, topic, args.partitions, args.stores)
        rate = load(bport, topic, args.messages, args.size, pids)
        print(f"# backlog: {args.messages} messages of {args.size} B over partitions {pids}, loaded at "
              f"{rate:,.0f} msg/s", flush=True)
        rows = sitting(f"127.0.0.1:{mport}", topic, len(pids), args)
    summary(rows, PATHS, latency=False)


if __name__ == "__main__":
    main()
