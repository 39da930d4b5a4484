#!/usr/bin/env python3
"""Ingest a text file into a TubeMQ topic, one message per line, as fast as the broker acknowledges.

Run from the source tree with a local server (``tubemq serve --data-dir ./tubemq-data --detach``)::

    tubemq topic create demo --if-not-exists
    python examples/ingest_file.py --master 127.0.0.1:8715 --topic demo examples/data/access.log

What it shows: ``send_async`` pipelining with a bounded number of unacknowledged messages,
attributes on every message, ``flush`` at the end, and an exact count of acknowledged messages.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time

import tubemq


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file")
    ap.add_argument("--master", default="127.0.0.1:8715")
    ap.add_argument("--topic", required=True)
    ap.add_argument("--window", type=int, default=1000, help="max unacknowledged messages")
    args = ap.parse_args()

    window = threading.Semaphore(args.window)  # back-pressure: never more than --window in flight
    lock = threading.Lock()
    acked = failed = 0
    errors: list[BaseException] = []

    def on_done(fut) -> None:  # runs on the client's I/O thread: keep it short
        nonlocal acked, failed
        window.release()
        with lock:
            if fut.exception() is None:
                acked += 1
            else:
                failed += 1
                errors.append(fut.exception())

    started = time.monotonic()
    sent = 0
    interrupted = False
    with tubemq.Producer(args.master) as producer, open(args.file, "rb") as f:
        try:
            for line in f:
                line = line.rstrip(b"\r\n")
                if not line:
                    continue  # the broker refuses empty messages
                window.acquire()
                fut = producer.send_async(args.topic, line, attributes={"source": "ingest_file"})
                fut.add_done_callback(on_done)
                sent += 1
        except KeyboardInterrupt:  # Ctrl-C: stop reading, still settle what is in flight
            interrupted = True
        pending = producer.flush(timeout=30.0)  # wait for every in-flight acknowledgement
    elapsed = time.monotonic() - started
    print(f"sent {sent}, acknowledged {acked}, failed {failed}, still pending {pending} "
          f"in {elapsed:.2f}s ({acked / max(elapsed, 1e-9):,.0f} msg/s)")
    if errors:
        print(f"first error: {errors[0]!r}", file=sys.stderr)
    if interrupted:
        print("interrupted: the counts above cover what was read before Ctrl-C", file=sys.stderr)
        return 130
    return 0 if acked == sent else 1


if __name__ == "__main__":
    sys.exit(main())
