"""The producer and consumer paths against any master, with client CPU: the same numbers on any cluster.

Runs, for each ``--sizes`` entry, into one topic:

1. ``pipelined``: ``Producer.send_async`` with ``--inflight`` messages unacknowledged (the ``tubemq produce``
   loop, ``tubemq.cli.pipeline.SendPipeline``), ``--messages`` messages or ``--seconds``, whichever first;
2. ``send``: blocking ``Producer.send`` one at a time (``--sync-messages`` or ``--seconds``), with the
   latency of every call (p50 / p99 / p99.9);

then ``consume``: one fresh consumer group (``consume_from="earliest"``, ``fetch_concurrency`` from
``--fetch-concurrency``, a comma list runs one fresh group per value) drains the backlog just written
(mixed sizes), the clock and the CPU counter running from its first message to the last.

For each: msg/s, MB/s and client CPU seconds per million messages (``time.process_time`` of this
process, every thread, over the measured interval), plus ``client CPU / wall`` (1.0 = one core busy)
and, when the broker's pid is known (the embedded server started here, or ``--server-pid`` of a local
broker, e.g. a real TubeMQ broker's JVM on the same machine), the broker's CPU from /proc. A client
near 1.0 core is the limit; a client well below it with the broker near its share is waiting on the
broker.

Without ``--master`` an embedded server is started as a child process (its own core, as a real broker
would have) with the topic created; with ``--master`` the topic must exist (or give ``--admin-url``
to create it). Every phase is bounded by count and time.

Usage: python bench/compare.py [--master HOST:PORT --topic T] [--sizes 100,1024] [--messages 200000]
       [--sync-messages 5000] [--seconds 20] [--fetch-concurrency 3] [--api sync|aio] [--server-pid PID] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import time
from array import array
from collections.abc import Iterator
from typing import Any

import tubemq
import tubemq.aio
from tubemq import codec
from tubemq.cli.common import temporary_server_process
from tubemq.cli.pipeline import SendPipeline, percentiles


def _stat_fields(pid: int | str) -> list[bytes] | None:
    """The fields of /proc/PID/stat after the command name (index 7 = minflt, 11 / 12 = utime / stime)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None


def proc_cpu(pid: int | None) -> float | None:
    """CPU seconds (user + system) of a local process from /proc, or None where that is not readable."""
    fields = None if pid is None else _stat_fields(pid)
    try:
        return None if fields is None else (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (ValueError, IndexError):
        return None


def minor_faults() -> int | None:
    """Minor page faults of this process so far (every thread), or None without /proc.

    A fault is a first touch of a page the process just mapped: a large object served by a fresh
    ``mmap`` (glibc serves allocations above its mmap threshold so) faults once per 4 KiB page.
    """
    fields = _stat_fields("self")
    try:
        return None if fields is None else int(fields[7])
    except (ValueError, IndexError):
        return None


class Meter:
    """Wall time, this process's CPU time and (if known) the broker's over one measured interval."""

    def __init__(self, server_pid: int | None) -> None:
        self.server_pid = server_pid
        self.start()

    def start(self) -> None:
        self.t0 = time.perf_counter()
        self.c0 = time.process_time()
        self.sys0 = os.times().system
        self.f0 = minor_faults()
        self.s0 = proc_cpu(self.server_pid)

    def stop(self, messages: int, nbytes: int) -> dict[str, Any]:
        wall = max(time.perf_counter() - self.t0, 1e-9)
        cpu = time.process_time() - self.c0
        sys_cpu = os.times().system - self.sys0
        f1 = minor_faults()
        s1 = proc_cpu(self.server_pid)
        out: dict[str, Any] = {
            "messages": messages, "seconds": round(wall, 3), "msg_per_s": round(messages / wall),
            "mb_per_s": round(nbytes / wall / 1e6, 2),
            "client_cpu_s_per_million": round(cpu / messages * 1e6, 3) if messages else None,
            "client_cpu_per_wall": round(cpu / wall, 2),
            "client_sys_cpu_s_per_million": round(sys_cpu / messages * 1e6, 3) if messages else None,
        }
        if self.f0 is not None and f1 is not None:
            out["client_minor_faults"] = f1 - self.f0
        if self.s0 is not None and s1 is not None:
            out["server_cpu_per_wall"] = round((s1 - self.s0) / wall, 2)
            out["server_cpu_s_per_million"] = round((s1 - self.s0) / messages * 1e6, 3) if messages else None
        return out


def _payload(size: int) -> bytes:
    return (os.urandom(min(size, 4096)) * (size // 4096 + 1))[:size]


def pipelined(master: str, topic: str, size: int, count: int, seconds: float, inflight: int,
              server_pid: int | None) -> dict[str, Any]:
    data = _payload(size)
    with tubemq.Producer(master) as producer:
        producer.publish([topic])
        for f in [producer.send_async(topic, data) for _ in range(min(2000, count))]:
            f.result(60)  # warm-up: connections open, partitions known
        pipe = SendPipeline(producer, topic, inflight=inflight)
        meter = Meter(server_pid)
        deadline = time.monotonic() + seconds
        for i in range(count):
            if not (i & 1023 or time.monotonic() < deadline) or not pipe.submit(data):
                break
        left = pipe.drain(60.0)
        result = meter.stop(pipe.acked, pipe.bytes_acked)
    if pipe.first_error is not None or left:
        raise SystemExit(f"pipelined send failed: {pipe.first_error!r}, {left} unanswered")
    result["written"] = pipe.acked + min(2000, count)
    return result


def blocking(master: str, topic: str, size: int, count: int, seconds: float, server_pid: int | None) -> dict[str, Any]:
    data = _payload(size)
    lat = array("d")
    with tubemq.Producer(master) as producer:
        for _ in range(min(200, count)):
            producer.send(topic, data)
        send = producer.send
        clock = time.perf_counter
        meter = Meter(server_pid)
        deadline = clock() + seconds
        for _ in range(count):
            t = clock()
            send(topic, data)
            now = clock()
            lat.append(now - t)
            if now > deadline:
                break
        result = meter.stop(len(lat), len(lat) * size)
    p = percentiles(lat, (50, 99, 99.9))
    result.update({"p50_ms": round(p[50] * 1e3, 3), "p99_ms": round(p[99] * 1e3, 3),
                   "p999_ms": round(p[99.9] * 1e3, 3), "written": len(lat) + min(200, count)})
    return result


def _fetch_figures(consumer: tubemq.Consumer) -> tuple[int, float]:
    """(getMessage requests answered, seconds they spent waiting for the broker in total)."""
    snap = consumer.metrics()
    lat = snap["latency"]["consumer.fetch_latency"]
    return int(lat["count"]), lat["count"] * lat["mean_ms"] / 1e3


def consume(master: str, topic: str, count: int, seconds: float, concurrency: int,
            server_pid: int | None, api: str = "sync") -> dict[str, Any]:
    """A fresh group drains ``count`` messages; clock and CPU from the first message to the last.

    Also: getMessage calls per second, messages per call, the broker's median answer time and the
    mean number of calls waiting for the broker (sum of answer times / wall). That number near the
    partitions owned (one fetch per partition at a time) with the client's CPU / wall well below 1.0
    says the broker is the limit: the client has a fetch waiting on every partition it may fetch.
    ``api="aio"``: ``tubemq.aio.Consumer`` and ``async for`` on this thread's event loop instead of
    ``for msg in tubemq.Consumer`` (whose event loop runs on a thread of its own).
    """
    group = f"compare_{os.getpid()}_{concurrency}_{int(time.time() * 1000) % 10**8}"
    got = nbytes = 0
    meter: Meter | None = None
    waited = 0.0
    fetches0, waited0 = 0, 0.0
    t_reg = time.perf_counter()
    # heartbeat every 2 s (like `tubemq consume`): the partitions arrive with a heartbeat answer, and
    # the wait for them is not part of the measurement anyway
    opts: dict[str, Any] = {"group": group, "topics": [topic], "consume_from": "earliest",
                            "fetch_concurrency": concurrency, "prefetch_batches": max(4, 2 * concurrency),
                            "heartbeat_period_ms": 2000, "iter_timeout_ms": int(max(seconds, 60) * 1000)}
    deadline = time.monotonic() + 120

    def first(consumer: Any) -> None:
        """The first message arrived: start the clocks (the per-message count is inlined in the loops
        below: a function call per message is this harness's cost, not the consumer's)."""
        nonlocal meter, waited, deadline, fetches0, waited0
        meter = Meter(server_pid)
        waited = time.perf_counter() - t_reg
        deadline = time.monotonic() + seconds
        fetches0, waited0 = _fetch_figures(consumer)

    def finish(consumer: Any) -> tuple[dict[str, Any], int, float, int]:
        if meter is None:
            raise SystemExit(f"no message arrived (topic {topic}, group {group})")
        result = meter.stop(got, nbytes)
        fetches1, waited1 = _fetch_figures(consumer)
        return result, fetches1, waited1, len(consumer.assignment())

    if api == "aio":
        async def drain() -> tuple[dict[str, Any], int, float, int]:
            nonlocal got, nbytes
            async with tubemq.aio.Consumer(master, **opts) as consumer:
                async for msg in consumer:
                    if meter is None:
                        first(consumer)
                    got += 1
                    nbytes += len(msg.data)
                    if got >= count or not (got & 4095 or time.monotonic() < deadline):
                        break
                return finish(consumer)

        result, fetches1, waited1, partitions = asyncio.run(drain())
    else:
        with tubemq.Consumer(master, **opts) as consumer:
            for msg in consumer:
                if meter is None:
                    first(consumer)
                got += 1
                nbytes += len(msg.data)
                if got >= count or not (got & 4095 or time.monotonic() < deadline):
                    break
            result, fetches1, waited1, partitions = finish(consumer)
    fetches = max(1, fetches1 - fetches0)
    result.update({"api": api, "fetch_concurrency": concurrency, "first_message_after_s": round(waited, 2),
                   "partitions": partitions, "fetches_per_s": round(fetches / result["seconds"]),
                   "messages_per_fetch": round(got / fetches), "fetch_wait_ms_mean": round((waited1 - waited0) / fetches * 1e3, 2),
                   "fetches_waiting_on_broker": round((waited1 - waited0) / result["seconds"], 2)})
    if "client_minor_faults" in result:
        result["client_minor_faults_per_fetch"] = round(result["client_minor_faults"] / fetches, 1)
    return result


@contextlib.contextmanager
def target(args: argparse.Namespace) -> Iterator[tuple[str, int | None, str]]:
    """(master, broker pid or None, description of the server)."""
    if args.master:
        if args.admin_url:
            from tubemq.cli.admin import AdminClient, AdminError

            try:
                AdminClient(args.admin_url).create_topic(args.topic, partitions=args.partitions)
            except AdminError as exc:
                print(f"topic {args.topic} not created ({exc.message}); using it as it is", file=sys.stderr)
        yield args.master, args.server_pid, f"master {args.master} (given)"
        return
    with temporary_server_process(quiet=True, balance_period_ms=1000) as server:
        server.create_topic(args.topic, args.partitions)
        yield server.master, server.process.pid, "embedded server, child process (python -m tubemq.cli.child_server)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--master", default=None, help="master HOST:PORT (default: start an embedded server)")
    ap.add_argument("--topic", default="compare", help="topic (must exist with --master unless --admin-url)")
    ap.add_argument("--admin-url", default=None, help="with --master: create --topic through this admin API")
    ap.add_argument("--partitions", type=int, default=3, help="partitions when the topic is created (default 3)")
    ap.add_argument("--sizes", default="100,1024", help="message sizes, comma separated (default 100,1024)")
    ap.add_argument("--messages", type=int, default=200_000, help="pipelined messages per size (default 200000)")
    ap.add_argument("--sync-messages", type=int, default=5_000, help="blocking sends per size (default 5000)")
    ap.add_argument("--inflight", type=int, default=5000, help="pipelined window (default 5000)")
    ap.add_argument("--seconds", type=float, default=20.0, help="time bound of every phase (default 20)")
    ap.add_argument("--fetch-concurrency", default="3",
                    help="consumer fetches in flight; a comma list runs one fresh group per value (default 3)")
    ap.add_argument("--server-pid", type=int, default=None, help="pid of a local broker, to report its CPU")
    ap.add_argument("--phases", default="pipelined,send,consume", help="subset of pipelined,send,consume")
    ap.add_argument("--api", choices=("sync", "aio"), default="sync",
                    help="consume with tubemq.Consumer (sync, default) or tubemq.aio.Consumer (aio)")
    ap.add_argument("--json", action="store_true", help="one JSON object per result line")
    args = ap.parse_args()
    phases = set(args.phases.split(","))

    rows: list[dict[str, Any]] = []

    def report(row: dict[str, Any]) -> None:
        rows.append(row)
        if args.json:
            print(json.dumps(row, sort_keys=True), flush=True)
            return
        extra = ""
        if "p50_ms" in row:
            extra = f"  latency p50 {row['p50_ms']:.3f} / p99 {row['p99_ms']:.3f} / p99.9 {row['p999_ms']:.3f} ms"
        if "fetch_concurrency" in row:
            extra = (f"  {row['api']}, fetch_concurrency {row['fetch_concurrency']}, first message after {row['first_message_after_s']} s;"
                     f" {row['fetches_per_s']} fetches/s of {row['messages_per_fetch']} msgs, broker answer"
                     f" {row['fetch_wait_ms_mean']} ms mean, {row['fetches_waiting_on_broker']} fetches waiting on it"
                     f" (of {row['partitions']} partitions)")
        if "client_minor_faults" in row:
            per = row.get("client_minor_faults_per_fetch")
            extra += (f"; client sys CPU {row['client_sys_cpu_s_per_million']} s per million, "
                      f"{row['client_minor_faults']} page faults" + (f" ({per} per fetch)" if per is not None else ""))
        server = ""
        if "server_cpu_per_wall" in row:
            server = f", server CPU/wall {row['server_cpu_per_wall']:.2f}"
        print(f"{row['phase']:>9} {row['size']:>6}: {row['msg_per_s']:>10,} msg/s {row['mb_per_s']:>8.2f} MB/s  "
              f"client CPU {row['client_cpu_s_per_million']} s per million msgs, CPU/wall "
              f"{row['client_cpu_per_wall']:.2f}{server}{extra}", flush=True)

    with target(args) as (master, server_pid, where):
        info = sys.stderr if args.json else sys.stdout  # --json: stdout holds only the JSON lines
        print(f"# {where}; codec {codec.implementation}, python {sys.version.split()[0]}, "
              f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}", file=info, flush=True)
        written = 0
        for size in (int(s) for s in args.sizes.split(",")):
            if "pipelined" in phases:
                r = pipelined(master, args.topic, size, args.messages, args.seconds, args.inflight, server_pid)
                written += r["written"]
                report({"phase": "pipelined", "size": size, **r})
            if "send" in phases:
                r = blocking(master, args.topic, size, args.sync_messages, args.seconds, server_pid)
                written += r["written"]
                report({"phase": "send", "size": size, **r})
        if "consume" in phases:
            backlog = written if written else args.messages
            for conc in (int(c) for c in args.fetch_concurrency.split(",")):
                r = consume(master, args.topic, backlog, args.seconds, conc, server_pid, args.api)
                report({"phase": "consume", "size": "mixed" if len(args.sizes.split(",")) > 1 else args.sizes, **r})
        print(f"# load average at the end {os.getloadavg()[0]:.1f}", file=info, flush=True)


if __name__ == "__main__":
    main()
