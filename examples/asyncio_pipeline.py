#!/usr/bin/env python3
"""An asyncio pipeline: consume a topic, enrich each JSON event, produce the result to another topic.

Run from the source tree with a local server (``tubemq serve --data-dir ./tubemq-data --detach``)::

    tubemq topic create raw --if-not-exists
    tubemq topic create enriched --if-not-exists
    seq 1 300 | tubemq produce --topic raw
    python examples/asyncio_pipeline.py --master 127.0.0.1:8715 --source raw --sink enriched --idle-timeout 10

Without ``--idle-timeout`` it runs until Ctrl-C, which ends it after the batch in hand.

Everything runs on one event loop: ``async for`` over the consumer, ``await producer.send(...)``
gathered per batch so sends overlap, and the batch is confirmed only after every enriched event of
it was acknowledged — a crash never loses an event between the two topics (at-least-once).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
import time

import tubemq
import tubemq.aio


def enrich(data: bytes) -> bytes:
    try:
        event = json.loads(data)
    except ValueError:
        event = {"raw": data.decode("utf-8", "replace")}
    if not isinstance(event, dict):
        event = {"value": event}
    event["enriched_at"] = int(time.time() * 1000)
    return json.dumps(event, separators=(",", ":")).encode()


def user_attributes(msg: tubemq.Message) -> dict[str, str] | None:
    """The message's own attributes (the $msgType$/$msgTime$ system keys travel as stream_id/msg_time)."""
    return {k: v for k, v in msg.attributes.items() if not k.startswith("$")} or None


def stop_on_signals() -> asyncio.Event:
    """Ctrl-C / SIGTERM set the event: the loop finishes the batch in hand, confirms it, and ends."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):  # no signal handlers on Windows
            loop.add_signal_handler(sig, stop.set)
    return stop


async def run(args: argparse.Namespace) -> int:
    done = 0
    stop = stop_on_signals()
    idle_since = time.monotonic()
    async with tubemq.aio.Producer(args.master) as producer, tubemq.aio.Consumer(
        args.master, group=args.group, topics=[args.source], consume_from="earliest"
    ) as consumer:
        print(f"enriching {args.source} into {args.sink} (Ctrl-C to stop)", flush=True)
        while not stop.is_set() and (args.max_messages is None or done < args.max_messages):
            batch = await consumer.poll(timeout=1.0)
            if batch is None or len(batch) == 0:
                if args.idle_timeout is not None and time.monotonic() - idle_since > args.idle_timeout:
                    break
                continue
            idle_since = time.monotonic()
            # all sends of the batch in flight at once; confirm only when all were acknowledged
            await asyncio.gather(*(producer.send(args.sink, enrich(m.data), stream_id=m.stream_id or None,
                                                 attributes=user_attributes(m)) for m in batch))
            await consumer.confirm(batch)
            done += len(batch)
    print(f"enriched {done} events from {args.source} into {args.sink}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--master", default="127.0.0.1:8715")
    ap.add_argument("--source", required=True)
    ap.add_argument("--sink", required=True)
    ap.add_argument("--group", default="enricher")
    ap.add_argument("--max-messages", type=int, default=None)
    ap.add_argument("--idle-timeout", type=float, default=None)
    return asyncio.run(run(ap.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
