"""``tubemq bench produce|consume``: throughput and latency against a master (or a temporary embedded one).

produce: pipelined sends of ``--size``-byte messages for ``--count`` messages or ``--duration`` seconds
with ``--inflight`` outstanding; latency = send_async call to acknowledgement.
consume: a fresh consumer group reads ``--count`` messages from the earliest offset (the embedded
server is pre-filled first); latency = duration of each poll() that returned data.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import time
from collections.abc import Iterator
from typing import Any

from .common import (
    CONSUMER_CLI_DEFAULTS,
    EXIT_FAILURE,
    EXIT_USAGE,
    CliError,
    check_reachable,
    client_target,
    eprint,
    note,
    open_client,
    temporary_server,
)
from .consume import IdleClock
from .output import format_table
from .pipeline import SendPipeline, StopFlag, percentiles, sigint_stops
from .progress import ProgressBar, format_count

HELP = "measure produce or consume throughput and latency"
PRODUCE_DOC = ("Pipelined sends of --size-byte messages for --count messages or --duration seconds with "
               "--inflight outstanding; latency = send_async call to acknowledgement. Without --master it "
               "starts a temporary embedded server.")
CONSUME_DOC = ("A fresh consumer group reads --count messages from the earliest offset (without --master a "
               "temporary embedded server is started and filled first); latency = duration of each poll() "
               "that returned data.")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--master", "-m", default=None,
                   help="master HOST:PORT (default: start a temporary embedded server)")
    p.add_argument("--topic", "-t", default="bench", help="topic (created on the embedded server; default bench)")
    p.add_argument("--partitions", type=int, default=3, help="partitions of the embedded topic (default 3)")
    p.add_argument("--size", "-s", type=int, default=100, help="message size in bytes (default 100)")
    p.add_argument("--count", "-n", type=int, default=None, help="messages (default 100000)")
    p.add_argument("--in-process", action="store_true",
                   help="run the temporary embedded server in this process (default: a child process)")
    p.add_argument("-X", "--option", action="append", metavar="KEY=VALUE",
                   help="client option for the producer/consumer, e.g. -X rpc_timeout_ms=5000")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object on stdout")
    p.add_argument("--progress", dest="progress", action="store_true", default=None, help="force the progress bar")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="never draw the progress bar")


def register(sub: Any) -> None:
    p = sub.add_parser("bench", help=HELP, description=HELP + ".")
    kinds = p.add_subparsers(dest="kind", metavar="KIND")
    kinds.required = True
    pp = kinds.add_parser("produce", help="producer throughput/latency", description=PRODUCE_DOC)
    _common(pp)
    pp.add_argument("--duration", "-d", type=float, default=None, help="run for this many seconds instead of --count")
    pp.add_argument("--inflight", type=int, default=1000, help="max unacknowledged messages (default 1000)")
    pp.set_defaults(func=run_produce)
    pc = kinds.add_parser("consume", help="consumer throughput/fetch latency", description=CONSUME_DOC)
    _common(pc)
    pc.add_argument("--group", "-g", default=None, help="consumer group (default: a fresh one)")
    pc.add_argument("--timeout", type=float, default=10.0, help="give up after this many idle seconds (default 10)")
    pc.add_argument("--prefill", type=int, default=None,
                    help="messages to produce first (default: --count on the embedded server, 0 otherwise)")
    pc.set_defaults(func=run_consume)


def _validate(args: argparse.Namespace) -> None:
    if args.size < 1:
        raise CliError("--size must be at least 1", EXIT_USAGE)
    if args.count is not None and args.count < 1:
        raise CliError("--count must be at least 1", EXIT_USAGE)
    if getattr(args, "duration", None) is not None and args.duration <= 0:
        raise CliError("--duration must be positive", EXIT_USAGE)
    if getattr(args, "inflight", 1) < 1:
        raise CliError("--inflight must be at least 1", EXIT_USAGE)
    if args.partitions < 1:
        raise CliError("--partitions must be at least 1", EXIT_USAGE)


@contextlib.contextmanager
def _target(args: argparse.Namespace) -> Iterator[str]:
    """The master to bench: the given one, or a temporary embedded server with the topic created."""
    if args.master:
        check_reachable(args.master)
        yield args.master
        return
    where = "in this process" if args.in_process else "(a child process, loopback)"
    note(f"no --master given; benchmarking a temporary embedded server {where}")
    with temporary_server(in_process=args.in_process) as server:
        server.create_topic(args.topic, args.partitions)
        yield server.master


def _payload(size: int) -> bytes:
    """Incompressible-looking bytes so nothing along the path can cheat on repetition."""
    return (os.urandom(min(size, 4096)) * (size // 4096 + 1))[:size]


def produce_messages(master: str, topic: str, count: int | None, size: int, *, inflight: int,
                     duration: float | None = None, progress: bool | None = None,
                     label: str = "bench produce", options: list[str] | None = None) -> tuple[SendPipeline, float]:
    """Pipelined sends; returns the settled pipeline and the wall time from first send to last ack."""
    from tubemq import Producer

    data = _payload(size)
    bar = ProgressBar(count if duration is None else None, label, enabled=progress)
    stop = StopFlag()
    producer = open_client(Producer, client_target(master, options))
    with producer:
        producer.publish([topic])
        pipe = SendPipeline(producer, topic, inflight=inflight, bar=bar, stop=stop, record_latency=True)
        t0 = time.monotonic()
        pipe.started = t0
        with sigint_stops(stop):
            try:
                if duration is not None:
                    end = t0 + duration
                    i = 0
                    while not stop and (i & 255 or time.monotonic() < end):
                        if not pipe.submit(data):
                            break
                        i += 1
                else:
                    for _ in range(count or 0):
                        if not pipe.submit(data):
                            break
            finally:
                pipe.drain(30.0)
                bar.close()
        wall = time.monotonic() - t0
    return pipe, wall


def _print_result(args: argparse.Namespace, result: dict[str, Any]) -> None:
    if args.json:
        print(json.dumps(result, sort_keys=True))
        return
    lat = result.get("latency_ms", {})
    rows = [
        ["messages", result["messages"]],
        ["message size", f"{result['size']} B" + (" (mean, measured)" if result["kind"] == "consume" else "")],
        ["elapsed", f"{result['seconds']:.2f} s"],
        ["throughput", f"{format_count(result['msg_per_s'])} msg/s"],
        ["bandwidth", f"{result['mb_per_s']:.2f} MB/s"],
        [f"{result['latency_kind']} p50", f"{lat.get('p50', float('nan')):.2f} ms"],
        [f"{result['latency_kind']} p99", f"{lat.get('p99', float('nan')):.2f} ms"],
        [f"{result['latency_kind']} p999", f"{lat.get('p999', float('nan')):.2f} ms"],
    ]
    if result.get("failed"):
        rows.append(["failed", result["failed"]])
    print(format_table([f"bench {result['kind']}", "value"], rows))


def _lat(samples: Any) -> dict[str, float]:
    p = percentiles(samples, (50, 99, 99.9))
    return {"p50": p[50] * 1e3, "p99": p[99] * 1e3, "p999": p[99.9] * 1e3}


def run_produce(args: argparse.Namespace) -> int:
    _validate(args)
    count = args.count if args.count is not None or args.duration is not None else 100_000
    with _target(args) as master:
        pipe, _ = produce_messages(master, args.topic, count, args.size, inflight=args.inflight,
                                   duration=args.duration, progress=args.progress, options=args.option)
    s = pipe.summary()
    result = {
        "kind": "produce", "messages": s["acknowledged"], "failed": s["failed"] + s["unknown"], "size": args.size,
        "inflight": args.inflight, "seconds": s["seconds"], "msg_per_s": s["msg_per_s"], "mb_per_s": s["mb_per_s"],
        "latency_kind": "send->ack", "latency_ms": _lat(pipe.latencies),
    }
    _print_result(args, result)
    if pipe.first_error is not None:
        eprint(f"tubemq bench: first error: {type(pipe.first_error).__name__}: {pipe.first_error}")
        return EXIT_FAILURE
    return 0


def run_consume(args: argparse.Namespace) -> int:
    _validate(args)
    from array import array

    from tubemq import Consumer

    count = args.count or 100_000
    with _target(args) as master:
        prefill = args.prefill if args.prefill is not None else (0 if args.master else count)
        if prefill:
            pipe, _ = produce_messages(master, args.topic, prefill, args.size, inflight=1000,
                                       progress=args.progress, label="prefill", options=args.option)
            if pipe.first_error is not None:
                raise CliError(f"prefill failed: {type(pipe.first_error).__name__}: {pipe.first_error}")
        group = args.group or f"bench_{os.getpid()}_{int(time.time())}"
        bar = ProgressBar(count, "bench consume", enabled=args.progress)
        samples: array = array("d")
        n = nbytes = 0
        stop = StopFlag()
        consumer = open_client(Consumer, client_target(master, args.option, CONSUMER_CLI_DEFAULTS), group=group,
                               topics=[args.topic], consume_from="earliest")
        with consumer:
            with sigint_stops(stop):
                t_first: float | None = None
                idle = IdleClock(consumer, args.timeout)
                while n < count and not stop and idle.left() > 0:
                    t = time.perf_counter()
                    batch = consumer.poll(timeout=0.5)
                    dt = time.perf_counter() - t
                    if batch is None or not len(batch):
                        continue
                    if t_first is None:
                        t_first = t
                    idle.touch()
                    samples.append(dt)
                    k = len(batch)
                    n += k
                    nbytes += sum(len(m.data) for m in batch)
                    consumer.confirm(batch)
                    bar.update(k)
                t_end = time.perf_counter()
        bar.close()
    seconds = max(t_end - (t_first if t_first is not None else t_end), 1e-9)
    # the size of what arrived, not --size: a real topic holds whatever its producers wrote
    result = {
        "kind": "consume", "messages": n, "size": round(nbytes / n) if n else 0, "bytes": nbytes, "seconds": seconds, "msg_per_s": n / seconds,
        "mb_per_s": nbytes / seconds / 1e6, "latency_kind": "poll", "latency_ms": _lat(samples), "failed": 0,
    }
    _print_result(args, result)
    if n < count:
        eprint(f"tubemq bench: only {n} of {count} messages arrived within the idle timeout")
        return EXIT_FAILURE
    return 0
