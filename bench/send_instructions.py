"""Client CPU instructions per message of the producer's send paths, counted by valgrind's callgrind.

Why: on a shared, loaded machine wall-clock figures swing by 2-3x between runs, while the number of
instructions the client executes for a send is the same whatever the load: comparing two trees with it
shows whether a change added work to (or took work from) a path. Only the client is counted: the
server is ``python -m tubemq.server`` in a separate process (embedded server), and only the counted
loop is collected (``--toggle-collect`` on the one ``sorted([0], key=...)`` call whose key function runs
it, after start-up and 200 warm-up sends); every client thread counts meanwhile (the producer's loop
thread too; the main thread's share is printed as well). Each figure is the difference between a run with ``--messages`` sends and one with none,
divided by ``--messages`` (the few other ``sorted`` calls of a run cancel out).

Paths: ``sync`` (blocking ``Producer.send``), ``pipe`` (``Producer.send_async`` in batches of 1000, then
each result), ``aio`` (``await tubemq.aio.Producer.send``, one in flight), ``raw`` (the raw blocking
loop of ``roundtrip.py``: pre-encoded frames, ``sendall`` + ``recv`` + ``FrameDecoder``; the floor), and
``sync_idle`` (``sync`` with a 2 ms sleep before each send, so that every send finds its channel idle and
checks it first: the blocking send's count then no longer depends on how fast the machine ran, which
decides for ``sync`` how many sends find their channel idle for over 1 ms).

``--tree NAME=SRC`` (repeatable) runs the clients with ``PYTHONPATH=SRC`` (default: the ``tubemq`` this
script imports); ``raw`` runs on the first tree only (it uses the client only to register).

Usage: python bench/send_instructions.py [--messages 2000] [--paths sync,pipe,aio,raw] [--tree base=/tmp/x/src]
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from bench_server import create_topic, embedded_server  # noqa: E402

TOPIC = "instructions"
BODY = b"x" * 100
PATHS = ("sync", "pipe", "aio", "raw")


def collected(loop: Callable[[], Any]) -> None:
    """Run ``loop`` inside ``builtin_sorted``, the function callgrind collects in (``--toggle-collect``)."""
    sorted([0], key=lambda _: loop())


def client(master: str, path: str, messages: int) -> None:
    """200 warm-up sends, then ``messages`` counted ones on ``path``."""
    import tubemq
    import tubemq.aio

    if path == "aio":
        loop = asyncio.new_event_loop()
        try:
            async def warm() -> Any:
                p = tubemq.aio.Producer(master, heartbeat_period_ms=600000)
                await p.start()
                for _ in range(200):
                    await p.send(TOPIC, BODY)
                return p

            async def counted_sends(p: Any) -> None:
                for _ in range(messages):
                    await p.send(TOPIC, BODY)

            p = loop.run_until_complete(warm())
            collected(lambda: loop.run_until_complete(counted_sends(p)))
            loop.run_until_complete(p.close())
        finally:
            loop.close()
        return
    with tubemq.Producer(master, heartbeat_period_ms=600000) as p:
        for _ in range(200):
            p.send(TOPIC, BODY)
        if path == "sync":
            def sends() -> None:
                for _ in range(messages):
                    p.send(TOPIC, BODY)
            collected(sends)
        elif path == "sync_idle":
            def idle_sends() -> None:
                for _ in range(messages):
                    time.sleep(0.002)
                    p.send(TOPIC, BODY)
            collected(idle_sends)
        elif path == "pipe":
            def pipelined() -> None:
                for start in range(0, messages, 1000):
                    for f in [p.send_async(TOPIC, BODY) for _ in range(min(1000, messages - start))]:
                        f.result()
            collected(pipelined)
        else:
            from roundtrip import RawLoop
            raw = RawLoop(p, TOPIC, BODY)
            try:
                def raw_loop() -> None:
                    for _ in range(messages):
                        raw.one()
                collected(raw_loop)
            finally:
                raw.close()


def counted(master: str, path: str, messages: int, src: str | None, out: str) -> tuple[int, int]:
    """Instructions of one client run under callgrind: (every thread, the main thread)."""
    env = dict(os.environ, PYTHONHASHSEED="0")
    if src:
        env["PYTHONPATH"] = src
    cmd = [sys.executable, os.path.abspath(__file__), "--client", master, "--paths", path,
           "--messages", str(messages)]
    subprocess.run(cmd, check=True, env=env, timeout=600)  # .pyc files written, caches warm: not counted
    subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "--dump-instr=no",
                    "--collect-atstart=no", "--toggle-collect=builtin_sorted", "--separate-threads=yes", *cmd],
                   check=True, env=env, timeout=1800, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    per_thread: dict[str, int] = {}
    for name in sorted(glob.glob(out + "-*")):
        with open(name) as f:
            for line in f:
                m = re.match(r"(?:summary|totals):\s+(\d+)", line)
                if m:
                    per_thread[name] = int(m.group(1))
                    break
        os.remove(name)
    if not per_thread:
        raise SystemExit(f"no totals in {out}-*")
    return sum(per_thread.values()), per_thread.get(out + "-01", 0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--messages", type=int, default=2000)
    ap.add_argument("--paths", default=",".join(PATHS))
    ap.add_argument("--tree", action="append", default=[], metavar="NAME=SRC")
    ap.add_argument("--client", metavar="MASTER", help=argparse.SUPPRESS)  # the counted child
    args = ap.parse_args()
    if args.client:
        client(args.client, args.paths, args.messages)
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("needs valgrind on PATH (apt-get install valgrind)")
    trees = [tuple(t.split("=", 1)) for t in args.tree] or [("this", None)]
    paths = args.paths.split(",")
    rows: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as data_dir:
        with embedded_server(data_dir) as (mport, _bport, aport):
            create_topic(aport, TOPIC, 3)
            master = f"127.0.0.1:{mport}"
            for path in paths:
                for k, (name, src) in enumerate(trees):
                    if path == "raw" and k:
                        continue
                    full, full_main = counted(master, path, args.messages, src, os.path.join(data_dir, "cg.full"))
                    base, base_main = counted(master, path, 0, src, os.path.join(data_dir, "cg.base"))
                    per = (full - base) / args.messages
                    main_per = (full_main - base_main) / args.messages
                    rows.setdefault(path, {})[name] = per
                    print(f"{path:5s} {name:8s} {per:10,.0f} instructions per message "
                          f"({main_per:,.0f} of them on the main thread)", flush=True)
    names = [t[0] for t in trees]
    print("\n| path | " + " | ".join(names) + " |")
    print("| --- |" + " --- |" * len(names))
    for path, by in rows.items():
        print(f"| {path} | " + " | ".join(f"{by[n]:,.0f}" if n in by else "" for n in names) + " |")


if __name__ == "__main__":
    main()
