"""One server per data directory: every server that writes to one holds its OS lock, a second is
refused with DataDirLockedError naming the directory and the holder's pid, and the OS frees the lock
when the holder dies (SIGKILL included)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import tubemq
from tubemq.errors import DataDirLockedError
from tubemq.server import EmbeddedCluster

from ._child import ServerChild

PORTS = ["--master-port", "0", "--broker-port", "0", "--admin-port", "0"]


def test_second_embedded_cluster_on_a_live_dir_is_refused(tmp_path: Path) -> None:
    d = tmp_path / "d"
    with EmbeddedCluster(data_dir=d) as first:
        first.create_topic("tl", partitions=1)
        t0 = time.monotonic()
        with pytest.raises(DataDirLockedError) as info:
            EmbeddedCluster(data_dir=d).start()
        print(f"refused in {time.monotonic() - t0:.2f} s: {info.value}")
        assert info.value.path == str(d) and info.value.pid == os.getpid()
        assert str(d) in str(info.value) and f"pid {os.getpid()}" in str(info.value)
        with tubemq.Producer(first.master_address) as p:  # the first server was not disturbed
            p.send("tl", b"still-served")
    with EmbeddedCluster(data_dir=d) as again:  # released by stop
        assert [t.name for t in again.topics()] == ["tl"]


def _serve(data_dir: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tubemq", "serve", "--data-dir", str(data_dir), *PORTS, *extra],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_second_process_refused_until_the_holder_is_killed(tmp_path: Path) -> None:
    d = tmp_path / "d"
    holder = ServerChild(d)
    try:
        t0 = time.monotonic()
        second = _serve(d)  # a foreground `tubemq serve` on the same directory
        took = time.monotonic() - t0
        print(f"second serve refused in {took:.2f} s: {second.stderr.strip()}")
        assert second.returncode != 0
        assert str(d) in second.stderr and f"pid {holder.proc.pid}" in second.stderr
        broker = _serve(d, "--role", "broker", "--master", "127.0.0.1:1",
                        "--master-admin-url", "http://127.0.0.1:1/webapi.htm")  # a broker process too
        assert broker.returncode != 0 and f"pid {holder.proc.pid}" in broker.stderr, broker.stderr
        detached = _serve(d, "--detach", "--ready-timeout", "30")  # its child is refused: the log says why
        assert detached.returncode != 0 and f"pid {holder.proc.pid}" in detached.stderr, detached.stderr
    finally:
        holder.kill()  # SIGKILL: no shutdown code runs, the OS frees the lock
    after = ServerChild(d)  # starts (ServerChild fails unless master and broker listen)
    try:
        assert (d / "tubemq.lock").read_text().strip() == str(after.proc.pid)
    finally:
        after.kill()


@pytest.mark.skipif(sys.platform == "win32", reason="--detach is POSIX only")
def test_detached_server_holds_the_lock(tmp_path: Path) -> None:
    d = tmp_path / "d"
    started = _serve(d, "--detach", "--ready-timeout", "60")
    assert started.returncode == 0, started.stderr
    pid = int((d / "tubemq-serve.pid").read_text())
    try:
        second = _serve(d)
        assert second.returncode != 0 and f"pid {pid}" in second.stderr, second.stderr
        with pytest.raises(DataDirLockedError) as info:
            EmbeddedCluster(data_dir=d).start()
        assert info.value.pid == pid
    finally:
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while True:  # the OS frees the lock once the process is gone (it is not our child: poll the lock)
        try:
            with EmbeddedCluster(data_dir=d):
                break
        except DataDirLockedError:
            assert time.monotonic() < deadline, "lock not freed after SIGKILL"
            time.sleep(0.1)
