"""`tubemq serve` tells where its admin API is: a file named after the master address, found by
``tubemq.server.endpoints.lookup`` while the process lives, removed on a clean stop."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tubemq.server import endpoints

from .helpers import admin_call, env, free_port, stop, wait_port


def test_serve_publishes_its_admin_endpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir = tmp_path / "run"
    monkeypatch.setenv(endpoints.ENV_DIR, str(run_dir))
    master, broker, admin = free_port(), free_port(), free_port()
    master_addr = f"127.0.0.1:{master}"
    assert endpoints.lookup(master_addr) is None
    proc = subprocess.Popen(
        [sys.executable, "-m", "tubemq.server", "--data-dir", str(tmp_path / "d"), "--master-port", str(master),
         "--broker-port", str(broker), "--admin-port", str(admin), "--log-level", "WARNING"],
        env=env(run_dir), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    try:
        wait_port(admin, proc)
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
