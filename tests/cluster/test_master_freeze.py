"""A frozen active master (SIGSTOP) is replaced, and steps down when it wakes (separate processes).

A stopped process keeps its listening sockets: connections to it succeed but nothing answers. The
standby must take over once the active master stops answering its sync call (a request with a
deadline), not only once its port closes; and the old master, woken up, must not answer as active
(the requests queued while it was frozen included) before it has seen the new active master's term.
"""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

import pytest
from server._raw import RawClient  # tests/ is on sys.path (rootdir-relative packages)

import tubemq
from tubemq import codec
from tubemq.protocol import master_pb

from .helpers import admin_call
from .procs import ProcCluster

pytestmark = pytest.mark.skipif(sys.platform == "win32" or not hasattr(signal, "SIGSTOP"), reason="needs SIGSTOP")

LIMIT_S = 60.0


def _standby(c: ProcCluster, master: int) -> bool:
    return bool(admin_call(c.admin_urls[master], "embedded_broker_status")["masterStandby"])


def _register(client: RawClient, serial_note: str) -> int:
    """Send a producer register; returns its serial (the answer is read later)."""
    req = master_pb.RegisterRequestP2M(clientId=f"p-freeze-{serial_note}", brokerCheckSum=-1, hostName="127.0.0.1")
    serial = next(client.serials)
    client.send_raw(codec.encode_request(serial, 1, 1, req.SerializeToString(), timeout_ms=60000))
    return serial


def test_frozen_active_master_is_replaced_and_steps_down_on_wake(tmp_path: Path) -> None:
    with ProcCluster(tmp_path, brokers=1, masters=2) as c:
        c.create_topic("frz", 1)
        deadline = time.monotonic() + LIMIT_S
        while not any(t["topicName"] == "frz" for t in
                      admin_call(c.admin_urls[1], "admin_query_topic_info").get("data", [])):
            assert time.monotonic() < deadline, "the standby did not copy the topic"
            time.sleep(0.1)
        c.wait_brokers(lambda b: b["online"] and b["synced"], 1, master=1)
        assert not _standby(c, 0) and _standby(c, 1)
        old = c.masters[0].popen
        assert old is not None
        old_addr = c.master_address.split(",")[0]
        queued = RawClient(old_addr)  # connected before the freeze; its request waits in the socket
        old.send_signal(signal.SIGSTOP)
        t_stop = time.monotonic()
        try:
            serial = _register(queued, "queued")
            deadline = time.monotonic() + LIMIT_S
            while _standby(c, 1):
                assert time.monotonic() < deadline, f"the standby never took over:\n{c.logs()}"
                time.sleep(0.1)
            t_active = time.monotonic()
            with tubemq.Producer(c.master_address, rpc_timeout_ms=3000) as p:  # m1 (frozen) first, then m2
                p.send("frz", b"while-frozen")
            t_sent = time.monotonic()
            print(f"\nstandby active {t_active - t_stop:.2f} s after SIGSTOP; a new Producer(m1, m2) sent "
                  f"{t_sent - t_stop:.2f} s after SIGSTOP")
            assert t_active - t_stop < LIMIT_S
        finally:
            old.send_signal(signal.SIGCONT)
        t_cont = time.monotonic()
        answer = queued.wait(serial, timeout=30)  # read by the woken master before any of its timers ran
        assert answer.status != 0 and "StandbyException" in answer.exception_name, answer
        queued.close()
        deadline = time.monotonic() + LIMIT_S
        while not _standby(c, 0):
            assert time.monotonic() < deadline, f"the woken master did not step down:\n{c.logs()}"
            time.sleep(0.1)
        print(f"the woken master stepped down {time.monotonic() - t_cont:.2f} s after SIGCONT")
        assert not _standby(c, 1)
        with RawClient(old_addr) as fresh:  # a client asking the old master now is sent away
            r = fresh.wait(_register(fresh, "after"), timeout=30)
            assert r.status != 0 and "StandbyException" in r.exception_name
        with tubemq.Producer(c.master_address, rpc_timeout_ms=3000) as p:
            p.send("frz", b"after-wake")
