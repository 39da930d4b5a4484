"""A cluster of separate `tubemq serve` processes (master(s) + brokers) on 127.0.0.1, for fault tests.

Every process is started with free ports and killed at the end (SIGKILL for the faults under test,
SIGTERM otherwise); each writes its log to ``<tmp>/<name>.log`` for post-mortems.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from .helpers import admin_call, env, free_port, stop, wait_port

#: Registration heartbeat of the broker processes and the master's timeout for them (the reroute
#: bound the tests document: a dead broker leaves topicInfos after at most this long).
BROKER_HB_MS = 300
BROKER_TIMEOUT_MS = 1500


@dataclass
class Proc:
    name: str
    args: list[str]
    log_path: Path
    popen: subprocess.Popen[Any] | None = None
    log: IO[bytes] | None = None


class ProcCluster:
    """``masters`` master processes (the first active, the others standby watching it) and brokers."""

    def __init__(self, tmp: Path, brokers: int = 3, masters: int = 1, balance_period_ms: int = 300) -> None:
        self.tmp = tmp
        self.run_dir = tmp / "run"
        self.masters: list[Proc] = []
        self.master_ports: list[int] = []
        self.admin_urls: list[str] = []
        self.brokers: dict[int, Proc] = {}
        self.broker_ports: dict[int, int] = {}
        for i in range(masters):
            port, admin = free_port(), free_port()
            args = ["--role", "master", "--data-dir", str(tmp / f"master{i + 1}"), "--master-port", str(port),
                    "--admin-port", str(admin), "--balance-period-ms", str(balance_period_ms)]
            if i > 0:
                args += ["--standby", "--peer-master", f"127.0.0.1:{self.master_ports[0]}"]
            self.masters.append(Proc(f"master{i + 1}", args, tmp / f"master{i + 1}.log"))
            self.master_ports.append(port)
            self.admin_urls.append(f"http://127.0.0.1:{admin}/webapi.htm")
        for bid in range(1, brokers + 1):
            port = free_port()
            self.broker_ports[bid] = port
            args = ["--role", "broker", "--master-admin-url", ",".join(self.admin_urls), "--broker-id", str(bid),
                    "--broker-port", str(port), "--data-dir", str(tmp / f"broker{bid}")]
            self.brokers[bid] = Proc(f"broker{bid}", args, tmp / f"broker{bid}.log")

    @property
    def master_address(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.master_ports)

    def _spawn(self, p: Proc) -> None:
        p.log = open(p.log_path, "ab")  # noqa: SIM115 - closed in _reap
        p.popen = subprocess.Popen(
            [sys.executable, "-m", "tubemq", "serve", *p.args, "--cache-flush-interval-ms", "1000",
             "--broker-heartbeat-period-ms", str(BROKER_HB_MS), "--broker-heartbeat-timeout-ms", str(BROKER_TIMEOUT_MS)],
            env=env(self.run_dir),
            stdout=p.log, stderr=subprocess.STDOUT,
        )

    def start(self) -> ProcCluster:
        for i, m in enumerate(self.masters):
            self._spawn(m)
            assert m.popen is not None
            wait_port(self.master_ports[i], m.popen)
        for bid in self.brokers:
            self.start_broker(bid, wait=False)
        for bid in self.brokers:
            p = self.brokers[bid].popen
            assert p is not None
            wait_port(self.broker_ports[bid], p)
        return self

    def start_broker(self, bid: int, wait: bool = True) -> None:
        p = self.brokers[bid]
        self._spawn(p)
        if wait:
            assert p.popen is not None
            wait_port(self.broker_ports[bid], p.popen)

    def kill(self, p: Proc, sig: int = signal.SIGKILL) -> None:
        if p.popen is not None:
            stop(p.popen, sig)
        if p.log is not None:
            p.log.close()
            p.log = None

    def kill_broker(self, bid: int) -> float:
        """SIGKILL one broker process; returns the monotonic time of the kill."""
        t = time.monotonic()
        self.kill(self.brokers[bid])
        return t

    def create_topic(self, name: str, partitions: int, broker_ids: list[int] | None = None,
                     timeout: float = 20.0) -> None:
        """Deploy on every master (the embedded masters do not replicate metadata), once all brokers of
        ``broker_ids`` registered (the admin API refuses unknown brokers, like the real master)."""
        ids = broker_ids or sorted(self.brokers)
        for url in self.admin_urls:
            deadline = time.monotonic() + timeout
            while True:
                r = admin_call(url, "admin_add_new_topic_record", type="op_modify", topicName=name,
                               numPartitions=partitions, brokerId=",".join(map(str, ids)))
                if r["result"]:
                    break
                if time.monotonic() > deadline:
                    raise AssertionError(f"topic {name} not created on {url}: {r['errMsg']}")
                time.sleep(0.1)
        self.wait_brokers(lambda b: b["synced"] and b["brokerId"] in ids, len(ids), timeout)

    def broker_status(self, master: int = 0) -> list[dict[str, Any]]:
        return list(admin_call(self.admin_urls[master], "embedded_broker_status")["data"])

    def wait_brokers(self, pred: Any, count: int, timeout: float = 20.0, master: int = 0) -> float:
        """Wait until ``count`` brokers satisfy ``pred`` on a master; returns the seconds waited."""
        t0 = time.monotonic()
        while sum(1 for b in self.broker_status(master) if pred(b)) < count:
            if time.monotonic() - t0 > timeout:
                raise AssertionError(f"brokers not ready after {timeout} s: {self.broker_status(master)}")
            time.sleep(0.05)
        return time.monotonic() - t0

    def close(self) -> None:
        for p in [*self.brokers.values(), *self.masters]:
            self.kill(p, signal.SIGTERM)

    def __enter__(self) -> ProcCluster:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc: object) -> None:
        self.close()

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.log_path.read_text(errors='replace')[-3000:]}"
                         for p in [*self.masters, *self.brokers.values()] if p.log_path.exists())
