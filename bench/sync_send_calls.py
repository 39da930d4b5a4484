"""Python function calls per blocking ``Producer.send``, per thread: a load-independent cost measure.

Why: on a shared, loaded machine the wall-clock figures of ``bench_producer.py`` swing by 2-3x between
runs, while the number of Python-level calls (``call`` + ``c_call`` profile events) each send costs in
the caller thread and on the client's loop thread is stable; comparing two trees with it shows whether
a change added work to the hot path. The server runs as ``python -m tubemq.server`` in a subprocess.

Usage: python bench/sync_send_calls.py [--messages 2000]
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile
import threading
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_server import create_topic, embedded_server  # noqa: E402

import tubemq  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--messages", type=int, default=2000)
    args = ap.parse_args()
    counts: collections.Counter[str] = collections.Counter()
    counting = [False]

    def profile(_frame: Any, event: str, _arg: Any) -> None:
        if counting[0] and event in ("call", "c_call"):
            name = threading.current_thread().name
            counts["loop thread" if "loop" in name else "caller thread"] += 1

    with tempfile.TemporaryDirectory() as data_dir:
        with embedded_server(data_dir) as (mport, bport, aport):
            create_topic(aport, "calls", 3)
            threading.setprofile(profile)  # the loop thread starts with the producer, after this
            sys.setprofile(profile)
            # no heartbeat during the count: only the sends are counted
            with tubemq.Producer(f"127.0.0.1:{mport}", heartbeat_period_ms=600000) as p:
                for _ in range(200):
                    p.send("calls", b"x" * 100)
                counting[0] = True
                for _ in range(args.messages):
                    p.send("calls", b"x" * 100)
                counting[0] = False
            sys.setprofile(None)
            threading.setprofile(None)  # type: ignore[arg-type]
    for where, n in sorted(counts.items()):
        print(f"{where:13s} {n / args.messages:6.1f} Python calls per send")


if __name__ == "__main__":
    main()
