"""Crash and churn scenarios shared by the reliability tests (small) and ``bench/soak.py`` (long).

* :func:`kill_mid_produce`: the embedded server runs as a child process (``python -m tubemq serve``);
  a producer sends numbered messages and the server is SIGKILLed once ``kill_after`` of them were
  acknowledged; the server is restarted on the same data and every partition is read back. An
  acknowledged message that is not there is *lost*; one that is there twice is a *duplicate*.
* :func:`consumer_churn`: consumers of one group keep joining, leaving and (as child processes)
  being SIGKILLed while messages flow; the in-process members' assignments are sampled atomically on
  their shared event-loop thread, and a partition registered by two members at once is *held twice*.
"""

from __future__ import annotations

import collections
import random
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _support import kill_signal
from _support.serve import ServerProcess

import tubemq
from tubemq.errors import TubeMQError

PAYLOAD = b"m%09d"


@dataclass
class KillResult:
    sent: int = 0
    acked: int = 0
    lost: int = 0  # acknowledged, not found after the restart
    duplicates: int = 0  # acknowledged, found more than once
    unacked_stored: int = 0  # not acknowledged (outcome unknown) but stored: allowed
    untyped_errors: int = 0  # send failures that are not TubeMQError


def _read_back(master: str, topic: str, group: str) -> collections.Counter[int]:
    seen: collections.Counter[int] = collections.Counter()
    bound = tubemq.BoundConsumer(master, group, [topic], pool="private")
    try:
        for part in bound.partitions(topic):
            for msg in bound.read_range(part, 0, timeout=5.0):
                if msg.data.startswith(b"m"):
                    seen[int(msg.data[1:])] += 1
    finally:
        bound.close()
    return seen


def kill_mid_produce(data_dir: Path, messages: int, kill_after: int, *, topic: str = "kill_t",
                     partitions: int = 3, trial: int = 0) -> KillResult:
    """One SIGKILL trial; see the module docstring."""
    server = ServerProcess(data_dir).start()
    res = KillResult()
    acked: set[int] = set()
    lock = threading.Lock()
    killed = threading.Event()
    try:
        server.create_topic(topic, partitions)
        producer = tubemq.Producer(server.master, pool="private", rpc_timeout_ms=3000)

        def done(i: int) -> Any:
            def cb(result: Any, exc: BaseException | None) -> None:
                if exc is None:
                    with lock:
                        acked.add(i)
                        if len(acked) >= kill_after and not killed.is_set():
                            killed.set()
                            server.kill()  # from the loop thread: nothing else is acknowledged meanwhile
                elif not isinstance(exc, TubeMQError):
                    res.untyped_errors += 1
            return cb

        for i in range(messages):
            if killed.is_set():
                break
            try:
                producer.send_async(topic, PAYLOAD % i, callback=done(i))
            except TubeMQError:
                if killed.is_set():
                    break
                raise
            res.sent += 1
        killed.wait(120)
        try:
            producer.close(timeout=5)
        except TubeMQError:
            pass
        with lock:
            res.acked = len(acked)
            acked_now = set(acked)
        server.stop()
        server.start()
        seen = _read_back(server.master, topic, f"g_verify_{trial}")
        res.lost = sum(1 for i in acked_now if seen[i] == 0)
        res.duplicates = sum(1 for i in acked_now if seen[i] > 1)
        res.unacked_stored = sum(1 for i in seen if i not in acked_now)
    finally:
        server.stop()
    return res


@dataclass
class ChurnResult:
    samples: int = 0  # atomic snapshots of the in-process members' assignments
    held_twice: int = 0  # partition seen registered by two members in one snapshot
    joins: int = 0
    leaves: int = 0
    kills: int = 0  # member processes SIGKILLed
    produced: int = 0
    missing: int = 0  # produced and acknowledged, never delivered to any member
    errors: list[str] = field(default_factory=list)


_MEMBER = """
import sys, time, tubemq
c = tubemq.Consumer(sys.argv[1], group=sys.argv[2], topics=[sys.argv[3]], consume_from="earliest",
                    pool="private", heartbeat_period_ms=500)
while True:
    b = c.poll(0.5)
    if b is not None:
        sys.stdout.write("".join(m.data.decode() + "\\n" for m in b)); sys.stdout.flush()
        c.confirm(b)
"""


def consumer_churn(master: str, topic: str, seconds: float, *, members: int = 3, seed: int = 1,
                   kill_processes: bool = True) -> ChurnResult:
    """Churn a group for ``seconds`` (bounded), then drain; see the module docstring."""
    rng = random.Random(seed)
    group = f"g_churn_{seed}"
    res = ChurnResult()
    delivered: set[int] = set()
    dlock = threading.Lock()
    opts: dict[str, Any] = {"consume_from": "earliest", "heartbeat_period_ms": 500, "pool": "private"}
    live: list[Any] = []
    procs: list[subprocess.Popen[bytes]] = []
    stop = threading.Event()

    def pump(c: Any) -> None:
        while not stop.is_set() and not c.closed:
            try:
                b = c.poll(0.2)
            except TubeMQError:
                return
            if b is not None:
                with dlock:
                    delivered.update(int(m.data[1:]) for m in b)
                try:
                    c.confirm(b)
                except TubeMQError:
                    pass

    def join() -> None:
        c = tubemq.Consumer(master, group=group, topics=[topic], **opts)
        live.append(c)
        threading.Thread(target=pump, args=(c,), daemon=True).start()
        res.joins += 1

    def spawn() -> None:
        procs.append(subprocess.Popen([sys.executable, "-c", _MEMBER, master, group, topic],
                                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL))

    def snapshot() -> None:
        if not live:
            return
        loop = live[0]._lt
        sets = loop.call(lambda: [{p.key for p in c._core.table.owned_partitions()} for c in live
                                  if not c.closed], timeout=5.0)
        res.samples += 1
        seen: collections.Counter[str] = collections.Counter(k for s in sets for k in s)
        res.held_twice += sum(1 for n in seen.values() if n > 1)

    producer = tubemq.Producer(master, pool="private")
    acked: set[int] = set()
    try:
        for _ in range(members):
            join()
        if kill_processes:
            spawn()
        t_end = time.monotonic() + seconds
        n = 0
        while time.monotonic() < t_end:
            for _ in range(20):
                try:
                    producer.send(topic, PAYLOAD % n)
                    acked.add(n)
                except TubeMQError as exc:
                    res.errors.append(f"send: {exc}")
                n += 1
            snapshot()
            r = rng.random()
            if r < 0.15 and len(live) > 1:
                c = live.pop(rng.randrange(len(live)))
                c.close()
                res.leaves += 1
            elif r < 0.30:
                join()
            elif kill_processes and r < 0.40:
                if procs:
                    p = procs.pop(0)
                    p.send_signal(kill_signal())
                    p.wait(10)
                    _collect(p, delivered, dlock)
                    res.kills += 1
                spawn()
            time.sleep(0.1)
        res.produced = n
        # drain: the survivors get everything that was acknowledged (killed members' partitions come
        # back after the broker expires them)
        for p in procs:
            p.send_signal(kill_signal())
            p.wait(10)
            _collect(p, delivered, dlock)
            res.kills += 1
        procs.clear()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            snapshot()
            with dlock:
                if acked <= delivered:
                    break
            time.sleep(0.25)
        with dlock:
            res.missing = len(acked - delivered)
    finally:
        stop.set()
        for p in procs:
            p.kill()
        for c in live:
            c.close()
        producer.close()
    return res


def _collect(p: subprocess.Popen[bytes], delivered: set[int], lock: threading.Lock) -> None:
    assert p.stdout is not None
    out = p.stdout.read()
    with lock:
        for line in out.split(b"\n"):
            if line.startswith(b"m"):
                delivered.add(int(line[1:]))


__all__ = ["ChurnResult", "KillResult", "ServerProcess", "consumer_churn", "kill_mid_produce"]
