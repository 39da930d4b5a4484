"""One sitting, one broker: the blocking send paths against a raw socket round trip (issue 20).

Why: wall-clock figures swing 2-3x between runs on a shared machine, so a blocking ``send`` is only
judged against a reference measured in the same run on the same broker: a raw blocking Python loop
(pre-encoded send frames, ``sendall`` + ``recv`` + ``FrameDecoder``, registered under the producer's
own client id and tokens). Paths, each run in turn for ``--seconds`` (``--rounds`` times, alternating):

* ``raw``        the reference loop above (one request in flight; a plain blocking socket, which
                 measured faster than one with a timeout, whose every ``recv`` polls first);
* ``sync``       ``tubemq.Producer.send`` (blocking, one thread);
* ``floor``      the least asyncio can do per round trip, on the same loop as ``aio``: a bare
                 ``asyncio.Protocol`` writing the ``raw`` path's pre-encoded frames and resolving one
                 future per answer (decoded as ``raw`` decodes it), awaited by one task: what
                 ``aio`` is to be judged against (the gap between ``raw`` and ``floor`` is asyncio's own);
* ``aio``        ``await tubemq.aio.Producer.send`` (one task, one request in flight);
* ``sync_pipe``  ``tubemq.Producer.send_async`` in batches of ``--batch`` (wait for each batch);
* ``aio_pipe``   ``await tubemq.aio.Producer.send_async`` in batches of ``--batch`` + ``gather``.

Printed per run: msg/s, latency p50/p99/p99.9 (per call for the one-in-flight paths, submit to
the last answer of a batch for the pipelined ones) and this process's CPU seconds per million messages (every
thread: the client's loop thread is included). The broker is an embedded server in a child process
(its own core) unless ``--master HOST:PORT`` names any cluster (the topic must exist there).

``--loop uvloop`` runs the asyncio paths (``floor``, ``aio``, ``aio_pipe``) on uvloop (``pip install
uvloop``); the blocking paths do not use a loop on their hot path.

Usage: python bench/roundtrip.py [--seconds 4] [--rounds 2] [--size 100] [--paths raw,sync,floor,aio,...]
       [--loop asyncio|uvloop] [--master HOST:PORT --topic NAME]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_server import create_topic, embedded_server  # noqa: E402

import tubemq  # noqa: E402
import tubemq.aio  # noqa: E402
from tubemq import codec  # noqa: E402

PATHS = ("raw", "sync", "floor", "aio", "sync_pipe", "aio_pipe")
ASYNC_PATHS = ("floor", "aio", "aio_pipe")


def percentiles(samples: list[float]) -> dict[str, float]:
    """p50 / p99 / p99.9 in microseconds."""
    if not samples:
        return {}
    s = sorted(samples)

    def q(p: float) -> float:
        return round(s[min(len(s) - 1, int(p * len(s)))] * 1e6, 1)

    return {"p50_us": q(0.50), "p99_us": q(0.99), "p999_us": q(0.999)}


def report(path: str, n: int, wall: float, cpu: float, lat: list[float]) -> dict[str, Any]:
    row: dict[str, Any] = {"path": path, "messages": n, "seconds": round(wall, 2), "msg_per_s": round(n / wall),
                           "cpu_s_per_million": round(cpu / max(n, 1) * 1e6, 2)}
    row.update(percentiles(lat))
    return row


def timed(path: str, seconds: float, one: Callable[[], None]) -> dict[str, Any]:
    """Call ``one()`` (one message) until ``seconds`` passed; per-call latency."""
    lat: list[float] = []
    clock = time.perf_counter
    c0, t0 = time.process_time(), clock()
    end = t0 + seconds
    n = 0
    while True:
        a = clock()
        one()
        b = clock()
        lat.append(b - a)
        n += 1
        if b >= end:
            break
    return report(path, n, clock() - t0, time.process_time() - c0, lat)


async def timed_async(path: str, seconds: float, one: Callable[[], Awaitable[Any]]) -> dict[str, Any]:
    """:func:`timed` for a coroutine: ``await one()`` (one message) until ``seconds`` passed."""
    lat: list[float] = []
    clock = time.perf_counter
    c0, t0 = time.process_time(), clock()
    end = t0 + seconds
    n = 0
    while True:
        a = clock()
        await one()
        b = clock()
        lat.append(b - a)
        n += 1
        if b >= end:
            break
    return report(path, n, clock() - t0, time.process_time() - c0, lat)


def send_frames(producer: Any, topic: str, body: bytes) -> tuple[list[bytes], Any]:
    """1024 send frames encoded in advance under ``producer``'s client id and tokens, and the partition."""
    engine = producer._core.engine
    part = producer.partitions(topic)[0]
    return [engine.plain_frame(serial, topic, part.partition_id, body) for serial in range(1, 1025)], part


class RawLoop:
    """The reference: a plain blocking socket to the partition's broker, frames encoded in advance."""

    def __init__(self, producer: tubemq.Producer, topic: str, body: bytes) -> None:
        self.frames, part = send_frames(producer, topic, body)
        self.sock = socket.create_connection((part.host, part.port), timeout=10)
        self.sock.settimeout(None)  # a plain blocking socket: recv is one system call (no poll first)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.decoder = codec.FrameDecoder()
        self.i = 0

    def one(self) -> None:
        frame = self.frames[self.i & 1023]
        self.i += 1
        self.sock.sendall(frame)
        while True:
            got = self.decoder.feed(self.sock.recv(65536))
            if got:
                rsp = codec.decode_response(got[0][1])
                if rsp.status or not codec.decode_send_response(rsp.body).success:
                    raise SystemExit(f"raw send refused: {rsp}")
                return

    def close(self) -> None:
        self.sock.close()


class _FloorProtocol(asyncio.Protocol):
    """The ``floor`` path's protocol: answers resolve the one waiting future, nothing else."""

    def __init__(self) -> None:
        self.decoder = codec.FrameDecoder()
        self.waiter: asyncio.Future[bytes] | None = None
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        for _serial, payload in self.decoder.feed(data):
            waiter, self.waiter = self.waiter, None
            if waiter is not None and not waiter.done():
                waiter.set_result(payload)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(ConnectionError(f"floor connection lost: {exc}"))


async def run_floor(frames: list[bytes], host: str, port: int, seconds: float) -> dict[str, Any]:
    """One task, one request in flight, on a bare protocol: the least asyncio does per round trip."""
    loop = asyncio.get_running_loop()
    transport, proto = await loop.create_connection(_FloorProtocol, host, port)
    create_future = loop.create_future
    decode_response, decode_send = codec.decode_response, codec.decode_send_response

    sent = 0

    async def one() -> None:
        nonlocal sent
        proto.waiter = fut = create_future()
        transport.write(frames[sent & 1023])
        sent += 1
        rsp = decode_response(await fut)
        if rsp.status or not decode_send(rsp.body).success:
            raise SystemExit(f"floor send refused: {rsp}")

    try:
        for _ in range(200):
            await one()
        return await timed_async("floor", seconds, one)
    finally:
        transport.close()


def run_sync_pipe(producer: tubemq.Producer, topic: str, body: bytes, seconds: float, batch: int) -> dict[str, Any]:
    lat: list[float] = []
    clock = time.perf_counter

    c0, t0 = time.process_time(), clock()
    end = t0 + seconds
    n = 0
    while clock() < end:
        a = clock()
        futs = [producer.send_async(topic, body) for _ in range(batch)]
        for f in futs:
            f.result()
        lat.append(clock() - a)  # one figure per batch: submit of the first to the last answer
        n += batch
    return report("sync_pipe", n, clock() - t0, time.process_time() - c0, lat)


async def run_aio(master: str, topic: str, body: bytes, seconds: float, batch: int,
                  paths: list[str]) -> list[dict[str, Any]]:
    out = []
    async with tubemq.aio.Producer(master, heartbeat_period_ms=600000) as p:
        await p.publish([topic])
        for _ in range(200):
            await p.send(topic, body)
        clock = time.perf_counter
        for path in paths:
            if path == "floor":
                frames, part = send_frames(p, topic, body)
                out.append(await run_floor(frames, part.host, part.port, seconds))
                continue
            if path == "aio":
                out.append(await timed_async("aio", seconds, lambda: p.send(topic, body)))
                continue
            lat: list[float] = []
            c0, t0 = time.process_time(), clock()
            end = t0 + seconds
            n = 0
            while clock() < end:
                a = clock()
                futs = [await p.send_async(topic, body) for _ in range(batch)]
                await asyncio.gather(*futs)
                lat.append(clock() - a)
                n += batch
            out.append(report(path, n, clock() - t0, time.process_time() - c0, lat))
    return out


def run_async(coro: Any, loop: str) -> Any:
    """``asyncio.run`` on the chosen event loop implementation."""
    if loop == "uvloop":
        import uvloop

        new_loop = uvloop.new_event_loop()
        try:
            asyncio.set_event_loop(new_loop)
            return new_loop.run_until_complete(coro)
        finally:
            asyncio.set_event_loop(None)
            new_loop.close()
    return asyncio.run(coro)


def sitting(master: str, topic: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    body = b"x" * args.size
    rows: list[dict[str, Any]] = []
    paths = [p for p in args.paths.split(",") if p]
    for rnd in range(args.rounds):
        with tubemq.Producer(master, heartbeat_period_ms=600000) as p:
            p.publish([topic])
            for _ in range(200):
                p.send(topic, body)
            for path in paths:
                if path == "raw":
                    raw = RawLoop(p, topic, body)
                    try:
                        for _ in range(200):
                            raw.one()
                        row = timed("raw", args.seconds, raw.one)
                    finally:
                        raw.close()
                elif path == "sync":
                    row = timed("sync", args.seconds, lambda: p.send(topic, body) and None)
                elif path == "sync_pipe":
                    row = run_sync_pipe(p, topic, body, args.seconds, args.batch)
                else:
                    continue
                row["round"] = rnd
                rows.append(row)
                print(json.dumps(row), flush=True)
        aio_paths = [x for x in paths if x in ASYNC_PATHS]
        if aio_paths:
            for row in run_async(run_aio(master, topic, body, args.seconds, args.batch, aio_paths), args.loop):
                row["round"] = rnd
                rows.append(row)
                print(json.dumps(row), flush=True)
    return rows


def _median(values: list[float]) -> float:
    s = sorted(values)
    return s[len(s) // 2]


def summary(rows: list[dict[str, Any]], paths: tuple[str, ...] = PATHS, latency: bool = True) -> None:
    """Per path: msg/s of each round, and the ratio to the raw loop of the SAME round (the machine's
    swing cancels out there), its median; p50 (``latency``) and CPU per million messages as medians of
    the rounds."""
    raw_by_round = {r["round"]: r["msg_per_s"] for r in rows if r["path"] == "raw"}
    print(f"\npath        msg/s (each round)           vs raw, same round (median)  {' p50 us' if latency else ''}  cpu s/M")
    for path in paths:
        mine = [r for r in rows if r["path"] == path]
        if not mine:
            continue
        rates = " / ".join(str(r["msg_per_s"]) for r in mine)
        ratios = [r["msg_per_s"] / raw_by_round[r["round"]] for r in mine if raw_by_round.get(r["round"])]
        ratio = (f"{' / '.join(f'{x:.2f}' for x in ratios)} ({_median(ratios):.2f})" if ratios else "-")
        p50 = f" {_median([r.get('p50_us', 0.0) for r in mine]):>8}" if latency else ""
        cpu = _median([r["cpu_s_per_million"] for r in mine])
        print(f"{path:<11} {rates:<28} {ratio:<29}{p50} {cpu:>8}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--paths", default=",".join(PATHS))
    ap.add_argument("--master", help="HOST:PORT of any cluster (default: an embedded server child process)")
    ap.add_argument("--topic", default="roundtrip")
    ap.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio",
                    help="event loop of the asyncio paths (uvloop: pip install uvloop)")
    args = ap.parse_args()
    print(f"# tubemq {tubemq.__version__} codec={codec.implementation} python={sys.version.split()[0]} "
          f"size={args.size} seconds={args.seconds} rounds={args.rounds} loop={args.loop} "
          f"load={os.getloadavg()[0]:.1f}", flush=True)
    if args.master:
        rows = sitting(args.master, args.topic, args)
    else:
        with tempfile.TemporaryDirectory() as d, embedded_server(d) as (mport, _bport, aport):
            create_topic(aport, args.topic, 1)
            rows = sitting(f"127.0.0.1:{mport}", args.topic, args)
    summary(rows)


if __name__ == "__main__":
    main()
