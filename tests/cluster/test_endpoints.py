"""`tubemq serve` tells where its admin API is: a file named after the master address, found by
``tubemq.server.endpoints.lookup`` while the process lives, removed on a clean stop."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tubemq.cli.common import free_port, start_on_free_ports
from tubemq.server import endpoints

from .helpers import START_TIMEOUT_S, admin_call, env, stop


def test_serve_publishes_its_admin_endpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir = tmp_path / "run"
    monkeypatch.setenv(endpoints.ENV_DIR, str(run_dir))

    def spawn(ports: list[int]) -> subprocess.Popen[bytes]:
        master, broker, admin = ports
        assert endpoints.lookup(f"127.0.0.1:{master}") is None
        return subprocess.Popen(
            [sys.executable, "-m", "tubemq.server", "--data-dir", str(tmp_path / "d"), "--master-port", str(master),
             "--broker-port", str(broker), "--admin-port", str(admin), "--log-level", "WARNING"],
            env=env(run_dir), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )

    proc, (master, broker, admin) = start_on_free_ports(spawn, 3, START_TIMEOUT_S)
    master_addr = f"127.0.0.1:{master}"
    try:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        deadline = time.monotonic() + 10
        ep = endpoints.lookup(master_addr)
        while ep is None and time.monotonic() < deadline:
            time.sleep(0.05)
            ep = endpoints.lookup(master_addr)
        assert ep is not None
        assert ep.admin_url == f"http://127.0.0.1:{admin}/webapi.htm"
        assert ep.brokers == [f"127.0.0.1:{broker}"] and ep.pid == proc.pid
        assert admin_call(ep.admin_url, "admin_query_topic_info")["result"] is True
        assert endpoints.lookup(f"127.0.0.1:{free_port()}") is None  # another address: nothing guessed
        # the CLI asks the published file instead of guessing host-of-master:8080
        cli = subprocess.run(
            [sys.executable, "-m", "tubemq", "topic", "list", "--master", master_addr],
            env=env(run_dir), capture_output=True, text=True, timeout=60,
        )
        assert cli.returncode == 0, cli.stderr
        assert f"admin API: {ep.admin_url} (published by the local `tubemq serve`" in cli.stderr
    finally:
        stop(proc)
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
    assert endpoints.lookup(master_addr) is None
    assert not list(run_dir.glob("*.json"))


def test_lookup_ignores_a_dead_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(endpoints.ENV_DIR, str(tmp_path))
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    endpoints.publish(endpoints.Endpoints("127.0.0.1:1", "http://127.0.0.1:2/webapi.htm", [], proc.pid))
    assert endpoints.lookup("127.0.0.1:1") is None
    endpoints.publish(endpoints.Endpoints("127.0.0.1:1", "http://127.0.0.1:2/webapi.htm", [], os.getpid()))
    ep = endpoints.lookup("127.0.0.1:1")
    assert ep is not None and ep.admin_url == "http://127.0.0.1:2/webapi.htm"


def _serve(args: list[str], run_dir: Path, log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen([sys.executable, "-m", "tubemq", "serve", *args], env=env(run_dir),
                                stdout=out, stderr=subprocess.STDOUT)


def test_serve_brokers_and_a_broker_process_found_by_master_address(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`tubemq serve --brokers 2` publishes both brokers; `--role broker --master HOST:PORT` finds
    that master's admin API through the published endpoints and joins it as broker 3."""
    run_dir = tmp_path / "run"
    monkeypatch.setenv(endpoints.ENV_DIR, str(run_dir))
    first, (master, _) = start_on_free_ports(
        lambda ports: _serve(["--data-dir", str(tmp_path / "m"), "--brokers", "2", "--master-port", str(ports[0]),
                              "--admin-port", str(ports[1]), "--broker-port", "0"], run_dir, tmp_path / "m.log"),
        2, START_TIMEOUT_S)
    procs = [first]
    try:
        assert first.poll() is None, (tmp_path / "m.log").read_text()
        deadline = time.monotonic() + 15
        ep = endpoints.lookup(f"127.0.0.1:{master}")
        while ep is None and time.monotonic() < deadline:
            time.sleep(0.05)
            ep = endpoints.lookup(f"127.0.0.1:{master}")
        assert ep is not None and len(ep.brokers) == 2 and len(set(ep.brokers)) == 2
        def broker3(ports: list[int]) -> subprocess.Popen[bytes]:
            procs.append(_serve(["--role", "broker", "--master", f"127.0.0.1:{master}", "--broker-id", "3",
                                 "--broker-port", str(ports[0]), "--data-dir", str(tmp_path / "b3")], run_dir,
                                tmp_path / "b3.log"))
            return procs[-1]

        b3, _ = start_on_free_ports(broker3, 1, START_TIMEOUT_S)
        assert b3.poll() is None, (tmp_path / "b3.log").read_text()
        deadline = time.monotonic() + 15
        while True:
            status = admin_call(ep.admin_url, "embedded_broker_status")["data"]
            if [b["brokerId"] for b in status if b["online"]] == [1, 2, 3]:
                break
            assert time.monotonic() < deadline, status
            time.sleep(0.05)
        r = admin_call(ep.admin_url, "admin_add_new_topic_record", type="op_modify", topicName="three",
                       brokerId="1,2,3")
        assert r["result"] and [(row["brokerId"], row["success"]) for row in r["data"]] == [
            (1, True), (2, True), (3, True)], r  # one row per broker, as a real master answers
        q = admin_call(ep.admin_url, "admin_query_topic_info", type="op_query", topicName="three")
        assert [i["brokerId"] for i in q["data"][0]["topicInfo"]] == [1, 2, 3]
    finally:
        for p in reversed(procs):
            stop(p)
    # a broker process without a findable master is a usage error, said in one line
    bad = subprocess.run([sys.executable, "-m", "tubemq", "serve", "--role", "broker", "--master",
                          f"127.0.0.1:{free_port()}", "--data-dir", str(tmp_path / "x")],
                         env=env(run_dir), capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--master-admin-url" in bad.stderr, bad.stderr
