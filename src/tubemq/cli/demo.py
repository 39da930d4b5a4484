"""``tubemq demo``: the whole path in one command, on a fresh machine.

Starts an embedded TubeMQ server in a temporary directory (unless ``--master`` is given), creates a
topic, ingests ``--events`` generated JSON events through a pipelined producer, reads them back
through a consumer group checking that every event arrived exactly once, optionally repeats the
ingestion through Spark (``--spark``), prints a summary table and cleans up.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from collections.abc import Iterator
from typing import Any

from .admin import AdminClient, AdminError
from .common import (
    CONSUMER_CLI_DEFAULTS,
    ENV_ADMIN_URL,
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    CliError,
    ServerTarget,
    check_reachable,
    client_target,
    eprint,
    note,
    plain,
    resolve_admin_url,
    temporary_server,
)
from .consume import IdleClock
from .output import format_table
from .pipeline import SendPipeline, StopFlag, sigint_stops
from .progress import ProgressBar, format_bytes, format_count

HELP = "run the end-to-end demo: embedded server, ingest N events, consume them back, summary"

_KINDS = (b"view", b"click", b"cart", b"order", b"refund")


def register(sub: Any) -> None:
    p = sub.add_parser("demo", help=HELP, description=plain((__doc__ or "").split("\n\n", 1)[1]))
    p.add_argument("--events", "-n", type=int, default=1_000_000, help="events to ingest (default 1000000)")
    p.add_argument("--master", "-m", default=None, help="use this master instead of a temporary embedded server")
    p.add_argument("--admin-url", default=None,
                   help="admin API of --master (http://HOST:PORT/webapi.htm), used to create the topic")
    p.add_argument("--admin-port", type=int, default=None,
                   help="admin HTTP port on the host of --master (instead of --admin-url)")
    p.add_argument("--topic", default="demo_events", help="topic name (default demo_events)")
    p.add_argument("--partitions", type=int, default=4, help="partitions of the topic (default 4)")
    p.add_argument("--inflight", type=int, default=1000, help="producer in-flight window (default 1000)")
    p.add_argument("--spark", action="store_true", help="also ingest and read back through Spark (needs Java)")
    p.add_argument("--spark-events", type=int, default=None,
                   help="events for the Spark part (default: min(--events, 100000))")
    p.add_argument("--consume-timeout", type=float, default=60.0,
                   help="fail when no event arrives for this many seconds while consuming (default 60)")
    p.add_argument("--in-process", action="store_true",
                   help="run the embedded server in this process (default: a child process, using a second core)")
    p.add_argument("--keep-data", action="store_true", help="keep the temporary data directory")
    p.add_argument("--progress", dest="progress", action="store_true", default=None, help="force progress bars")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="never draw progress bars")
    p.set_defaults(func=run)


def event(i: int) -> bytes:
    """Event ``i`` as compact JSON (deterministic, so a consumer can check what it got)."""
    h = (i * 2654435761) & 0xFFFFFFFF
    return b'{"id":%d,"user":"u%05d","kind":"%s","amount":%d.%02d,"ts":%d}' % (
        i, h % 50000, _KINDS[h % 5], (h >> 8) % 500, h % 100, 1_700_000_000_000 + i,
    )


def event_id(data: bytes) -> int:
    """The id of an event (the first field) without a JSON parse."""
    return int(data[6 : data.index(b",", 6)])


@contextlib.contextmanager
def _server(args: argparse.Namespace) -> Iterator[ServerTarget]:
    """A temporary embedded server (a child process, or in-process with --in-process), or --master."""
    if args.master is None:
        note("no --master given; starting an embedded TubeMQ server in a temporary directory")
        with temporary_server(in_process=args.in_process, keep=args.keep_data) as server:
            yield server
        return
    check_reachable(args.master)
    if not (args.admin_url or args.admin_port is not None or os.environ.get(ENV_ADMIN_URL)):
        # the admin port cannot be derived from the master's address: create nothing rather than
        # send the call to whatever listens on the master's host at 8080
        def skip(name: str, partitions: int) -> None:
            note(f"no --admin-url given: topic {name} not created; it must exist on {args.master}")

        yield ServerTarget(args.master, f"master {args.master}", skip)
        return
    url = resolve_admin_url(args.admin_url, args.master, args.admin_port)
    admin = AdminClient(url, os.environ.get("TUBEMQ_ADMIN_TOKEN"))

    def create(name: str, partitions: int) -> None:
        try:
            admin.create_topic(name, partitions=partitions)
            note(f"created topic {name} through {admin.url}")
        except AdminError as exc:
            note(f"topic {name} not created ({exc.message}); assuming it exists")
        except OSError as exc:  # TubeMQConnectionError is one
            note(f"admin API not reachable ({exc}); assuming topic {name} exists")

    yield ServerTarget(args.master, f"master {args.master}", create)


def _ingest(master: str, args: argparse.Namespace, stop: StopFlag) -> dict[str, Any]:
    from tubemq import Producer

    bar = ProgressBar(args.events, "ingest ", enabled=args.progress)
    with Producer(master) as producer:
        producer.publish([args.topic])
        pipe = SendPipeline(producer, args.topic, inflight=args.inflight, bar=bar, stop=stop)
        t0 = time.monotonic()
        pipe.started = t0
        try:
            for i in range(args.events):
                if not pipe.submit(event(i)):
                    break
        finally:
            pipe.drain(60.0)
            bar.close()
        elapsed = time.monotonic() - t0
    s = pipe.summary()
    if pipe.first_error is not None and not stop.reason == "interrupted":
        raise CliError(f"ingestion failed after {s['acknowledged']} events: "
                       f"{type(pipe.first_error).__name__}: {pipe.first_error}")
    return {"acked": s["acknowledged"], "failed": s["failed"], "unknown": s["unknown"], "bytes": s["bytes"],
            "seconds": elapsed}


def _consume(master: str, args: argparse.Namespace, expected: int, stop: StopFlag) -> dict[str, Any]:
    from tubemq import Consumer

    seen = bytearray(args.events)
    unique = dups = foreign = nbytes = 0
    group = f"demo_group_{os.getpid()}_{int(time.time())}"
    bar = ProgressBar(expected, "consume", enabled=args.progress)
    t0 = time.monotonic()
    with Consumer(client_target(master, None, CONSUMER_CLI_DEFAULTS), group=group, topics=[args.topic],
                  consume_from="earliest") as consumer:
        idle = IdleClock(consumer, args.consume_timeout)
        while unique < expected and not stop and idle.left() > 0:
            batch = consumer.poll(timeout=0.5)
            if batch is None or not len(batch):
                continue
            idle.touch()
            for msg in batch:
                data = msg.data
                nbytes += len(data)
                try:
                    i = event_id(data)
                except ValueError:
                    foreign += 1
                    continue
                if not 0 <= i < args.events:
                    foreign += 1
                elif seen[i]:
                    dups += 1
                else:
                    seen[i] = 1
                    unique += 1
            consumer.confirm(batch)
            bar.update(len(batch))
    bar.close()
    return {"unique": unique, "duplicates": dups, "foreign": foreign, "bytes": nbytes,
            "seconds": time.monotonic() - t0, "group": group}


def _spark(target: ServerTarget, args: argparse.Namespace) -> dict[str, Any]:
    """Ingest through Spark's batch writer and read back with the batch reader (tubemq.spark)."""
    from .spark_demo import java_problem, run_spark_demo

    problem = java_problem()
    if problem:
        raise CliError(f"--spark: {problem}")
    n = args.spark_events if args.spark_events is not None else min(args.events, 100_000)
    topic = args.topic + "_spark"
    target.create_topic(topic, args.partitions)
    return run_spark_demo(target.master, topic, n, partitions=args.partitions)


def run(args: argparse.Namespace) -> int:
    if args.events < 1:
        raise CliError("--events must be at least 1", EXIT_USAGE)
    if args.inflight < 1 or args.partitions < 1:
        raise CliError("--inflight and --partitions must be at least 1", EXIT_USAGE)
    from tubemq import codec

    stop = StopFlag()
    rows: list[list[Any]] = []
    spark_result: dict[str, Any] | None = None
    with sigint_stops(stop, lambda: eprint("\ntubemq demo: interrupted; settling in-flight work")), \
            _server(args) as target:
        master, where = target.master, target.where
        target.create_topic(args.topic, args.partitions)
        eprint(f"tubemq demo: ingesting {args.events:,} events into topic {args.topic} "
               f"({args.partitions} partitions, codec: {codec.implementation})")
        ing = _ingest(master, args, stop)
        if stop.reason == "interrupted":
            eprint(f"tubemq demo: interrupted after {ing['acked']:,} acknowledged events")
            return EXIT_INTERRUPTED
        eprint("tubemq demo: reading them back through a consumer group")
        con = _consume(master, args, ing["acked"], stop)
        if args.spark and not stop:
            eprint("tubemq demo: the same ingestion through Spark")
            spark_result = _spark(target, args)
    rows.append(["server", where])
    rows.append(["events ingested (acknowledged)", f"{ing['acked']:,}"])
    rows.append(["ingest time", f"{ing['seconds']:.2f} s"])
    rows.append(["ingest rate", f"{format_count(ing['acked'] / max(ing['seconds'], 1e-9))} events/s "
                                f"({ing['bytes'] / max(ing['seconds'], 1e-9) / 1e6:.1f} MB/s)"])
    rows.append(["events consumed (unique)", f"{con['unique']:,}"])
    rows.append(["duplicates / unknown", f"{con['duplicates']} / {con['foreign']}"])
    rows.append(["consume time", f"{con['seconds']:.2f} s"])
    rows.append(["consume rate", f"{format_count(con['unique'] / max(con['seconds'], 1e-9))} events/s"])
    rows.append(["data volume", format_bytes(ing["bytes"])])
    if spark_result is not None:
        rows.append(["spark: events written", f"{spark_result['written']:,}"])
        rows.append(["spark: events read back", f"{spark_result['read']:,}"])
        rows.append(["spark: write / read time", f"{spark_result['write_seconds']:.1f} s / "
                                                  f"{spark_result['read_seconds']:.1f} s"])
    lost = ing["acked"] - con["unique"]
    ok = lost == 0 and not ing["failed"] and not ing["unknown"] and (
        spark_result is None or spark_result["read"] == spark_result["written"])
    rows.append(["result", "OK: every acknowledged event consumed" if ok else f"PROBLEM: {lost} events missing"])
    print(format_table(["tubemq demo", "value"], rows))
    if stop.reason == "interrupted":
        return EXIT_INTERRUPTED
    return 0 if ok else EXIT_FAILURE
