"""What one blocking ``Producer.send`` costs the client, in load-independent units, per thread.

Why: on a shared, loaded machine the wall-clock figures of ``bench_producer.py`` swing by 2-3x between
runs, while these counts are stable; comparing two trees with them shows whether a change added work to
(or took work from) the hot path:

* Python calls per send (``call`` + ``c_call`` profile events), in the caller thread and on the client's
  loop thread; with ``--pipelined``, per message of ``send_async`` in batches of 1000 (the other path,
  which a change to the blocking one must not make dearer);
* with ``--syscalls``: system calls per send of the client process only (``strace -c -f`` on a client
  subprocess, the server not traced), from the difference between a run with ``--messages`` sends and
  one with none (same start-up and warm-up), so start-up costs cancel out.

The server runs as ``python -m tubemq.server`` in a subprocess (embedded server).

``--threads N``: N threads share the producer, each sending ``--messages`` (figures per message).

Usage: python bench/sync_send_calls.py [--messages 2000] [--syscalls] [--pipelined] [--threads 1]
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_server import create_topic, embedded_server  # noqa: E402

import tubemq  # noqa: E402

TOPIC = "calls"


def send_loop(master: str, messages: int, profile: Any = None, pipelined: bool = False, threads: int = 1) -> None:
    """200 warm-up sends, then ``messages`` counted ones per thread (no heartbeat meanwhile)."""
    counting = profile is not None
    if counting:
        threading.setprofile(profile)  # the loop thread starts with the producer, after this
        sys.setprofile(profile)
    try:
        with tubemq.Producer(master, heartbeat_period_ms=600000) as p:
            for _ in range(200):
                p.send(TOPIC, b"x" * 100)
            if counting:
                profile.on = True

            def one_thread() -> None:
                if pipelined:
                    for start in range(0, messages, 1000):
                        for f in [p.send_async(TOPIC, b"x" * 100) for _ in range(min(1000, messages - start))]:
                            f.result()
                else:
                    for _ in range(messages):
                        p.send(TOPIC, b"x" * 100)

            if threads == 1:
                one_thread()
            else:
                workers = [threading.Thread(target=one_thread, name=f"sender-{i}") for i in range(threads)]
                for w in workers:
                    w.start()
                for w in workers:
                    w.join()
            if counting:
                profile.on = False
    finally:
        if counting:
            sys.setprofile(None)
            threading.setprofile(None)  # type: ignore[arg-type]


class CallCounter:
    def __init__(self) -> None:
        self.on = False
        self.counts: collections.Counter[str] = collections.Counter()

    def __call__(self, _frame: Any, event: str, _arg: Any) -> None:
        if self.on and event in ("call", "c_call"):
            name = threading.current_thread().name
            self.counts["loop thread" if "loop" in name else "caller thread"] += 1


def strace_counts(master: str, messages: int, out: str, threads: int = 1) -> dict[str, int]:
    """syscall -> calls of a client subprocess sending ``messages`` (strace -c -f, client only)."""
    cmd = ["strace", "-f", "-c", "-o", out, sys.executable, os.path.abspath(__file__), "--client", master,
           "--messages", str(messages), "--threads", str(threads)]
    subprocess.run(cmd, check=True, timeout=600)
    counts: dict[str, int] = {}
    with open(out) as f:
        for line in f:
            parts = line.split()
            # "% time seconds usecs/call calls [errors] syscall"
            if len(parts) >= 5 and parts[0][0].isdigit() and parts[-1] != "total":
                counts[parts[-1]] = int(parts[3])
    return counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--messages", type=int, default=2000)
    ap.add_argument("--syscalls", action="store_true", help="also count system calls per send (needs strace)")
    ap.add_argument("--pipelined", action="store_true", help="count Python calls per send_async message instead")
    ap.add_argument("--threads", type=int, default=1, help="sending threads sharing the producer (default 1)")
    ap.add_argument("--client", metavar="MASTER", help=argparse.SUPPRESS)  # the traced child
    args = ap.parse_args()
    if args.client:
        send_loop(args.client, args.messages, threads=args.threads)
        return
    if args.syscalls and shutil.which("strace") is None:
        raise SystemExit("--syscalls needs strace on PATH")
    counter = CallCounter()
    with tempfile.TemporaryDirectory() as data_dir:
        with embedded_server(data_dir) as (mport, _bport, aport):
            create_topic(aport, TOPIC, 3)
            master = f"127.0.0.1:{mport}"
            send_loop(master, args.messages, counter, args.pipelined, args.threads)
            what = "pipelined send_async" if args.pipelined else "send"
            total = args.messages * args.threads
            for where, n in sorted(counter.counts.items()):
                print(f"{where:13s} {n / total:6.1f} Python calls per {what}")
            if args.syscalls:
                full = strace_counts(master, args.messages, os.path.join(data_dir, "strace-full.txt"), args.threads)
                base = strace_counts(master, 0, os.path.join(data_dir, "strace-base.txt"), args.threads)
                per = {k: (full.get(k, 0) - base.get(k, 0)) / total for k in full}
                shown = {k: v for k, v in sorted(per.items(), key=lambda kv: -kv[1]) if v >= 0.05}
                print(f"client        {sum(per.values()):6.1f} system calls per send: "
                      + ", ".join(f"{k} {v:.1f}" for k, v in shown.items()))


if __name__ == "__main__":
    main()
