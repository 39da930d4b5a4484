"""End-to-end producer throughput against the embedded server (issue 4 speed targets).

The server runs as ``python -m tubemq.server`` in a subprocess (its own process and core, as the
Java client's broker was on the reference machine); the producer runs in this process over real TCP
on 127.0.0.1. Scenarios (reference: the official Java client against a real broker on loopback):

* ``sync``       ``Producer.send`` one at a time, 100 B            (Java ~10.4k msg/s)
* ``sync4``      ``Producer.send`` from 4 threads sharing one producer, 100 B (total msg/s)
* ``async``      ``Producer.send_async`` pipelined, 100 B            (Java ~70k msg/s)
* ``async1k``    ``Producer.send_async`` pipelined, 1 KiB            (Java ~62k msg/s)
* ``aio``        ``tubemq.aio.Producer.send_async`` pipelined (futures, no task per message), 100 B

Also reports the encode cost of one send-request frame: ``codec.encode_send_request`` vs building
the same frame from protobuf objects (issue target: at least 5x faster).

Usage: python bench/bench_producer.py [--seconds 5] [--scenarios sync,sync4,async,async1k,aio] [--partitions 3]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import concurrent.futures
import os
import sys
import tempfile
import time
import timeit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_server import create_topic, embedded_server  # noqa: E402

import tubemq  # noqa: E402
import tubemq.aio  # noqa: E402
from tubemq import codec  # noqa: E402
from tubemq.protocol import broker_pb, rpc_pb  # noqa: E402


def run_sync(master: str, topic: str, size: int, seconds: float) -> float:
    payload = os.urandom(size)
    with tubemq.Producer(master) as p:
        for _ in range(200):
            p.send(topic, payload)
        n = 0
        t0 = time.perf_counter()
        deadline = t0 + seconds
        while True:
            for _ in range(100):
                p.send(topic, payload)
            n += 100
            now = time.perf_counter()
            if now >= deadline:
                return n / (now - t0)


def run_sync_threads(master: str, topic: str, size: int, seconds: float, threads: int = 4) -> float:
    """``threads`` threads each sending one message at a time through one producer (total msg/s)."""
    payload = os.urandom(size)
    counts = [0] * threads
    with tubemq.Producer(master) as p:
        for _ in range(200):
            p.send(topic, payload)
        t0 = time.perf_counter()
        deadline = t0 + seconds

        def worker(i: int) -> None:
            n = 0
            while time.perf_counter() < deadline:
                for _ in range(50):
                    p.send(topic, payload)
                n += 50
            counts[i] = n

        with concurrent.futures.ThreadPoolExecutor(threads) as pool:
            list(pool.map(worker, range(threads)))
        return sum(counts) / (time.perf_counter() - t0)


def run_async(master: str, topic: str, size: int, seconds: float) -> float:
    payload = os.urandom(size)
    with tubemq.Producer(master) as p:
        for f in [p.send_async(topic, payload) for _ in range(2000)]:
            f.result()
        n = 0
        futs: collections.deque[concurrent.futures.Future[tubemq.SendResult]] = collections.deque()
        t0 = time.perf_counter()
        deadline = t0 + seconds
        send_async = p.send_async
        while time.perf_counter() < deadline:
            futs.extend(send_async(topic, payload) for _ in range(1000))
            n += 1000
            while len(futs) > 50000:  # check acknowledgements as they come, like an application
                futs.popleft().result()
        for f in futs:
            f.result()  # every message acknowledged (raises on any failure)
        return n / (time.perf_counter() - t0)


def run_aio(master: str, topic: str, size: int, seconds: float) -> float:
    payload = os.urandom(size)

    async def main() -> float:
        async with tubemq.aio.Producer(master) as p:
            await asyncio.gather(*[await p.send_async(topic, payload) for _ in range(2000)])
            n = 0
            t0 = time.perf_counter()
            deadline = t0 + seconds
            pending: list[asyncio.Future[tubemq.SendResult]] = []
            while time.perf_counter() < deadline:
                pending.extend([await p.send_async(topic, payload) for _ in range(1000)])
                n += 1000
                if len(pending) >= 20000:  # keep a deep pipeline, collect the older half
                    await asyncio.gather(*pending[:10000])
                    del pending[:10000]
            await asyncio.gather(*pending)
            return n / (time.perf_counter() - t0)

    return asyncio.run(main())


def encode_compare(size: int) -> tuple[float, float]:
    """ns per complete send-request frame: hot-path encoder vs protobuf objects."""
    data = codec.encode_payload(os.urandom(size), "k1=v1,k2=v2")
    cid = "10.0.0.5-4242-1795308994585261502-777-py-0.1.0"

    def fast() -> bytes:
        return codec.encode_send_request(7, cid, "topic-a", 1, data, 1, 167772165, 1795303356106,
                                         msg_type="typeA", timeout_ms=10000)

    def proto() -> bytes:
        req = broker_pb.SendMessageRequestP2B(
            clientId=cid, topicName="topic-a", partitionId=1, data=data, flag=1, checkSum=-1,
            sentAddr=167772165, msgType="typeA",
            authInfo=broker_pb.AuthorizedInfo(visitAuthorizedToken=1795303356106),
        )
        body = rpc_pb.RequestBody(method=13, timeout=10000, request=req.SerializeToString())
        header = rpc_pb.RequestHeader(serviceType=3, protocolVer=3)
        conn = rpc_pb.RpcConnHeader(flag=0)
        out = b""
        for m in (conn, header, body):
            s = m.SerializeToString()
            out += _varint(len(s)) + s
        return codec.encode_frame(7, out)

    assert fast() == proto()
    n = 100000
    t_fast = min(timeit.repeat(fast, number=n, repeat=5)) / n * 1e9
    t_proto = min(timeit.repeat(proto, number=n // 5, repeat=5)) / (n // 5) * 1e9
    return t_fast, t_proto


def _varint(v: int) -> bytes:
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


#: scenario -> (runner, message size). No Java figure here: those were taken on a real broker, these run
#: against the embedded server, and a ratio between the two would compare servers, not clients.
SCENARIOS = {
    "sync": (run_sync, 100),
    "sync4": (run_sync_threads, 100),
    "async": (run_async, 100),
    "async1k": (run_async, 1024),
    "aio": (run_aio, 100),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--scenarios", default="sync,sync4,async,async1k,aio")
    ap.add_argument("--partitions", type=int, default=3)
    args = ap.parse_args()
    print(f"codec: {codec.implementation}")
    for size in (100, 10240):
        fast, proto = encode_compare(size)
        print(f"encode send request {size:>5} B: hot path {fast:8.0f} ns, protobuf objects {proto:8.0f} ns "
              f"({proto / fast:.1f}x)")
    with tempfile.TemporaryDirectory() as data_dir:
        with embedded_server(data_dir) as (mport, bport, aport):
            master = f"127.0.0.1:{mport}"
            for i, name in enumerate(args.scenarios.split(",")):
                fn, size = SCENARIOS[name]
                topic = f"bench{i}"
                create_topic(aport, topic, args.partitions)
                rate = fn(master, topic, size, args.seconds)
                print(f"{name:8s} {size:>5} B: {rate:10,.0f} msg/s (embedded server)", flush=True)


if __name__ == "__main__":
    main()
