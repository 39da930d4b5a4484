#!/usr/bin/env python3
"""Read an InLong topic with asyncio: decode each TubeMQ message as an InLongMsg container, count records.

Run from the source tree with a local server (``tubemq serve --data-dir ./tubemq-data --detach``)::

    tubemq topic create inlong_events --if-not-exists
    python examples/inlongmsg_asyncio.py --master 127.0.0.1:8715 --topic inlong_events --produce 300 --idle-timeout 5

InLong's DataProxy writes containers of many records into TubeMQ; ``msg.inlongmsg()`` decodes one
(v0-v4, raw or snappy -- snappy needs ``pip install 'tubemq[inlong]'``). ``--produce N`` first packs N
demo records into containers with ``InLongMsgBuilder``, the way DataProxy does, so the script also
runs on a topic nothing else writes to. A message that is not a container is counted
and skipped; batches are confirmed once all their records were handled.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import signal
import sys
import time

import tubemq
import tubemq.aio
from tubemq.errors import InLongMsgError
from tubemq.inlongmsg import InLongMsgBuilder


async def produce_demo(args: argparse.Namespace) -> None:
    """Pack ``args.produce`` records into containers (one per ~4 KB, per stream) and send them."""
    builders: dict[str, InLongMsgBuilder] = {}
    async with tubemq.aio.Producer(args.master) as producer:
        sends = []
        for i in range(args.produce):
            stream = f"stream{i % 3}"
            attr = f"groupId=demo&streamId={stream}&dt={int(time.time() * 1000)}"
            b = builders.setdefault(stream, InLongMsgBuilder(version=1, compress=False))
            if not b.add(attr, f'{{"event": {i}}}'.encode()):
                sends.append(producer.send(args.topic, b.build(), stream_id=stream))
                del builders[stream]
        for stream, b in builders.items():
            sends.append(producer.send(args.topic, b.build(), stream_id=stream))
        await asyncio.gather(*sends)
    print(f"sent {args.produce} records in {len(sends)} containers")


def stop_on_signals() -> asyncio.Event:
    """Ctrl-C / SIGTERM set the event: the loop finishes the batch in hand, confirms it, and ends."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):  # no signal handlers on Windows
            loop.add_signal_handler(sig, stop.set)
    return stop


async def run(args: argparse.Namespace) -> int:
    stop = stop_on_signals()
    if args.produce:
        await produce_demo(args)
    per_stream: collections.Counter[str] = collections.Counter()
    messages = invalid = 0
    idle_since = time.monotonic()
    async with tubemq.aio.Consumer(args.master, group=args.group, topics=[args.topic],
                                   consume_from="earliest") as consumer:
        print(f"reading {args.topic} as group {args.group} (Ctrl-C to stop)", flush=True)
        while not stop.is_set() and (args.max_records is None or sum(per_stream.values()) < args.max_records):
            batch = await consumer.poll(timeout=1.0)
            if batch is None or len(batch) == 0:
                # a group's first partition assignment can take a while: wait at least a minute for it
                limit = args.idle_timeout if messages else max(args.idle_timeout, 60.0)
                if time.monotonic() - idle_since > limit:
                    break
                continue
            idle_since = time.monotonic()
            for msg in batch:
                messages += 1
                try:
                    container = msg.inlongmsg()
                except InLongMsgError as exc:
                    invalid += 1
                    print(f"skipping message {msg.message_id}: {exc}", file=sys.stderr)
                    continue
                for attributes, _body in container.records():
                    per_stream[attributes.get("streamId", "?")] += 1
            await consumer.confirm(batch)
    total = sum(per_stream.values())
    print(f"decoded {total} records from {messages} messages ({invalid} not InLong containers)")
    for stream, n in sorted(per_stream.items()):
        print(f"  {stream}: {n}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--master", default="127.0.0.1:8715")
    ap.add_argument("--topic", required=True)
    ap.add_argument("--group", default="inlong-reader")
    ap.add_argument("--produce", type=int, default=0, help="first send this many demo records")
    ap.add_argument("--max-records", type=int, default=None)
    ap.add_argument("--idle-timeout", type=float, default=10.0, help="stop after this many seconds without data")
    return asyncio.run(run(ap.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
