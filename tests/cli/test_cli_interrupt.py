"""Ctrl-C while the server is frozen (``kill -STOP``): the second Ctrl-C abandons at once (issue 14.4).

A real server process is stopped with SIGSTOP, so its sockets stay open and nothing answers: the
in-flight messages then time out or stay pending, and both are *unknown* outcomes, never "failed".
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

import pytest

import tubemq
from tubemq.cli.common import temporary_server_process

from .helpers import cli_env, wait_for

pytestmark = pytest.mark.skipif(
    not hasattr(signal, "SIGSTOP") or sys.platform == "win32",
    reason="needs POSIX SIGSTOP/SIGCONT to freeze the server process",
)


def _produce_until_acked(master: str, topic: str, extra: list[str]) -> tuple[subprocess.Popen[bytes], list[bytes], Any]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tubemq", "produce", "-t", topic, "-m", master, "--json-summary",
         "--inflight", "200", "--progress", *extra, "-"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env(),
    )
    assert proc.stdin is not None and proc.stderr is not None
    err: list[bytes] = []

    def writer() -> None:
        i = 0
        try:
            while i < 5_000_000 and proc.poll() is None:
                proc.stdin.write(b"".join(b"m-%d\n" % (i + k) for k in range(100)))  # type: ignore[union-attr]
                proc.stdin.flush()  # type: ignore[union-attr]
                i += 100
        except (BrokenPipeError, OSError, ValueError):  # ValueError: the test closed stdin
            pass

    def reader() -> None:
        while chunk := proc.stderr.read1(4096):  # type: ignore[union-attr]
            err.append(chunk)

    threads = [threading.Thread(target=writer, daemon=True), threading.Thread(target=reader, daemon=True)]
    for t in threads:
        t.start()
    wait_for(lambda: b"msg/s" in b"".join(err), 90, what="the first acknowledgements on the progress bar")
    return proc, err, threads


@pytest.mark.parametrize(("options", "pause"), [
    ([], 1.0),  # the second Ctrl-C comes while the messages are still waiting for an answer
    (["-X", "rpc_timeout_ms=3000"], 4.5),  # ... after they timed out: unknown, not failed
], ids=["pending", "timed-out"])
def test_second_ctrl_c_abandons_at_once_against_a_frozen_server(options: list[str], pause: float) -> None:
    with temporary_server_process(quiet=True, balance_period_ms=200) as server:
        server.create_topic("frozen", partitions=2)
        proc, err, threads = _produce_until_acked(server.master, "frozen", options)
        os.kill(server.process.pid, signal.SIGSTOP)
        try:
            time.sleep(0.5)  # the window fills with messages nobody will answer
            proc.send_signal(signal.SIGINT)
            time.sleep(pause)
            assert proc.poll() is None, "the first Ctrl-C should wait for the in-flight messages"
            t0 = time.monotonic()
            proc.send_signal(signal.SIGINT)
            out, _ = proc.communicate(timeout=30)
            took = time.monotonic() - t0
        finally:
            os.kill(server.process.pid, signal.SIGCONT)
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
            for t in threads:
                t.join(10)
    stderr = b"".join(err).decode(errors="replace")
    assert proc.returncode == 130, stderr
    assert took < 5.0, f"the second Ctrl-C took {took:.1f} s to exit:\n{stderr[-2000:]}"
    assert "Traceback" not in stderr
    assert out.strip(), stderr[-3000:]
    summary = json.loads(out)
    assert summary["failed"] == 0, summary
    assert summary["unknown"] > 0, summary
    assert summary["acknowledged"] + summary["unknown"] == summary["submitted"], summary
    assert f"{summary['unknown']} unknown" in stderr, stderr[-2000:]




def _stored(master: str, topic: str) -> int:
    """How many messages the topic holds (read from offset 0 by a bound consumer of its own)."""
    bound = tubemq.BoundConsumer(master, "stored_probe", [topic], pool="private")
    try:
        return sum(1 for part in bound.partitions(topic) for _ in bound.read_range(part, 0, timeout=5.0))
    finally:
        bound.close()


def test_drain_timeout_against_a_frozen_server_reports_unknown() -> None:
    """No Ctrl-C: the input ends, the wait for acknowledgements ends at --drain-timeout, and what is
    left is unknown, not failed (closing the producer fails those futures locally)."""
    with temporary_server_process(quiet=True, balance_period_ms=200) as server:
        server.create_topic("frozen_drain", partitions=1)
        proc = subprocess.Popen(
            # rpc_timeout_ms=3000 (the smallest allowed): the close after the drain waits one RPC timeout
            # for the frozen server, 3 s instead of the default 10 s; the outcome is the same
            [sys.executable, "-m", "tubemq", "produce", "-t", "frozen_drain", "-m", server.master, "--json-summary",
             "--drain-timeout", "1", "-X", "rpc_timeout_ms=3000", "-"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env(),
        )
        assert proc.stdin is not None and proc.stderr is not None
        err: list[bytes] = []
        reader = threading.Thread(target=lambda: [err.append(c) for c in iter(lambda: proc.stderr.read1(4096), b"")],  # type: ignore[union-attr]
                                  daemon=True)
        reader.start()
        try:
            proc.stdin.write(b"".join(b"early-%d\n" % i for i in range(10)))
            proc.stdin.flush()
            # registered (it sent them) and acknowledged before the server freezes: an outcome, not a sleep
            wait_for(lambda: _stored(server.master, "frozen_drain") >= 10, 90, what="the 10 early messages stored")
            os.kill(server.process.pid, signal.SIGSTOP)
            proc.stdin.write(b"".join(b"late-%d\n" % i for i in range(100)))  # small: never blocks
            proc.stdin.close()  # end of input: drain for 1 s, then report
            proc.wait(90)
            out = proc.stdout.read()  # type: ignore[union-attr]  # one JSON line
        finally:
            os.kill(server.process.pid, signal.SIGCONT)
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
            reader.join(10)
    stderr = b"".join(err).decode(errors="replace")
    assert proc.returncode == 1 and out.strip(), stderr[-3000:]
    summary = json.loads(out)
    assert summary["submitted"] == 110 and summary["failed"] == 0, summary
    assert summary["unknown"] >= 100 and summary["acknowledged"] + summary["unknown"] == 110, summary
