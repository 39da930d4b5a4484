#!/usr/bin/env python3
"""A consumer-group worker: run several copies and TubeMQ spreads the partitions between them.

Run from the source tree with a local server (``tubemq serve --data-dir ./tubemq-data --detach``)::

    tubemq topic create demo --if-not-exists
    seq 1 1000 | tubemq produce --topic demo
    python examples/consumer_group_worker.py --master 127.0.0.1:8715 --topic demo --group workers --idle-timeout 10

Without ``--idle-timeout`` it runs until Ctrl-C; start more copies to see the partitions spread.

Each fetched batch is confirmed after the loop body has processed all of its messages (at-least-once:
a worker that dies re-delivers at most its current batch to the group). SIGTERM/Ctrl-C stop it
cleanly: the current batch is finished, confirmed, and the partitions are released to the others.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time

import tubemq


def process(msg: tubemq.Message) -> None:
    """Your business logic. Here: parse JSON if it is JSON, otherwise just look at the size."""
    try:
        json.loads(msg.data)
    except ValueError:
        pass


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--master", default="127.0.0.1:8715")
    ap.add_argument("--topic", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--max-messages", type=int, default=None, help="stop after this many (default: run forever)")
    ap.add_argument("--idle-timeout", type=float, default=None,
                    help="stop after this many seconds without a message, counted once the group gave us partitions")
    ap.add_argument("--assign-timeout", type=float, default=120.0,
                    help="with --idle-timeout: give up when no partition arrives within this many seconds "
                         "(a real master balances every 60 s; default 120)")
    args = ap.parse_args()

    stopping = False

    def stop(signum, frame) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    count = 0
    # "idle" means no message while owning partitions: a new member first waits for the master to
    # assign it some (a balance round plus a heartbeat), which says nothing about the topic being empty
    idle_since: float | None = None
    assign_deadline = time.monotonic() + args.assign_timeout
    with tubemq.Consumer(args.master, group=args.group, topics=[args.topic], consume_from="earliest") as consumer:
        print(f"consuming {args.topic} as group {args.group} (Ctrl-C to stop)", flush=True)
        while not stopping:
            batch = consumer.poll(timeout=1.0)
            if batch is None or len(batch) == 0:
                if args.idle_timeout is None:
                    continue
                if idle_since is None:
                    if consumer.assignment():
                        idle_since = time.monotonic()
                    elif time.monotonic() > assign_deadline:
                        print(f"no partitions assigned within {args.assign_timeout:g} s", file=sys.stderr)
                        break
                elif time.monotonic() - idle_since > args.idle_timeout:
                    break
                continue
            idle_since = time.monotonic()
            for msg in batch:
                process(msg)
            consumer.confirm(batch)  # commit the batch only after all of it was processed
            count += len(batch)
            if args.max_messages is not None and count >= args.max_messages:
                break
    print(f"processed {count} messages")
    return 0


if __name__ == "__main__":
    sys.exit(main())
