"""A cluster of separate `tubemq serve` processes (master(s) + brokers) on 127.0.0.1, for fault tests.

Every process is started on free ports (start_on_free_ports: new ones if a port was taken before the
process bound it) and killed at the end (SIGKILL for the faults under test,
SIGTERM otherwise); each writes its log to ``<tmp>/<name>.log`` for post-mortems.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from _support import kill_signal

from tubemq.cli.common import start_on_free_ports

from .helpers import START_TIMEOUT_S, admin_call, env, stop, wait_port

#: Registration heartbeat of the broker processes and the master's timeout for them (the reroute
#: bound the tests document: a dead broker leaves topicInfos after at most this long).
BROKER_HB_MS = 300
BROKER_TIMEOUT_MS = 1500


@dataclass
class Proc:
    """One `tubemq serve` process: ``args_for(ports)`` are its options, ``ports`` where it listens (the
    first is the one to wait for), chosen at its first start and kept for restarts."""

    name: str
    args_for: Callable[[list[int]], list[str]]
    nports: int
    log_path: Path
    ports: list[int] = field(default_factory=list)
    popen: subprocess.Popen[Any] | None = None
    log: IO[bytes] | None = None


class ProcCluster:
    """``masters`` master processes (the first active, the others standby watching it) and brokers."""

    def __init__(self, tmp: Path, brokers: int = 3, masters: int = 1, balance_period_ms: int = 300) -> None:
        self.tmp = tmp
        self.run_dir = tmp / "run"
        self.masters: list[Proc] = []
        self.brokers: dict[int, Proc] = {}
        for i in range(masters):
            def master_args(ports: list[int], i: int = i) -> list[str]:
                args = ["--role", "master", "--data-dir", str(tmp / f"master{i + 1}"), "--master-port",
                        str(ports[0]), "--admin-port", str(ports[1]), "--balance-period-ms", str(balance_period_ms)]
                if i > 0:
                    args += ["--standby", "--peer-master", f"127.0.0.1:{self.master_ports[0]}"]
                return args

            self.masters.append(Proc(f"master{i + 1}", master_args, 2, tmp / f"master{i + 1}.log"))
        for bid in range(1, brokers + 1):
            def broker_args(ports: list[int], bid: int = bid) -> list[str]:
                return ["--role", "broker", "--master-admin-url", ",".join(self.admin_urls), "--broker-id",
                        str(bid), "--broker-port", str(ports[0]), "--data-dir", str(tmp / f"broker{bid}")]

            self.brokers[bid] = Proc(f"broker{bid}", broker_args, 1, tmp / f"broker{bid}.log")

    @property
    def master_ports(self) -> list[int]:
        return [m.ports[0] for m in self.masters if m.ports]

    @property
    def admin_urls(self) -> list[str]:
        return [f"http://127.0.0.1:{m.ports[1]}/webapi.htm" for m in self.masters if m.ports]

    @property
    def broker_ports(self) -> dict[int, int]:
        return {bid: p.ports[0] for bid, p in self.brokers.items() if p.ports}

    @property
    def master_address(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.master_ports)

    def _spawn(self, p: Proc, ports: list[int]) -> subprocess.Popen[bytes]:
        if p.log is None:
            p.log = open(p.log_path, "ab")  # noqa: SIM115 - closed in kill
        p.popen = subprocess.Popen(
            [sys.executable, "-m", "tubemq", "serve", *p.args_for(ports), "--cache-flush-interval-ms", "1000",
             "--broker-heartbeat-period-ms", str(BROKER_HB_MS), "--broker-heartbeat-timeout-ms", str(BROKER_TIMEOUT_MS)],
            env=env(self.run_dir),
            stdout=p.log, stderr=subprocess.STDOUT,
        )
        return p.popen

    def _start(self, p: Proc) -> None:
        """First start on free ports (new ones when a port was taken meanwhile); restarts on the same."""
        if p.ports:
            wait_port(p.ports[0], self._spawn(p, p.ports))
            return
        proc, ports = start_on_free_ports(lambda ports: self._spawn(p, ports), p.nports, START_TIMEOUT_S)
        if proc.poll() is not None:
            raise AssertionError(f"{p.name} exited with {proc.returncode} at start:\n{self.logs()}")
        p.ports = ports

    def start(self) -> ProcCluster:
        for m in self.masters:
            self._start(m)
        for bid in self.brokers:
            self._start(self.brokers[bid])
        return self

    def start_broker(self, bid: int) -> None:
        """Start a broker (again, after a kill: on the same port)."""
        self._start(self.brokers[bid])

    def kill(self, p: Proc, sig: int | None = None) -> None:
        """Stop a process: SIGKILL by default (tests that call it are marked ``needs_sigkill``)."""
        if p.popen is not None:
            stop(p.popen, kill_signal() if sig is None else sig)
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
        """Deploy on the first (active) master once all brokers of ``broker_ids`` registered (the admin
        API refuses unknown brokers, like the real master); standbys copy it (server/replication.py)."""
        ids = broker_ids or sorted(self.brokers)
        for url in self.admin_urls[:1]:
            deadline = time.monotonic() + timeout
            while True:
                r = admin_call(url, "admin_add_new_topic_record", type="op_modify", topicName=name,
                               numPartitions=partitions, brokerId=",".join(map(str, ids)))
                # a broker not registered yet is a 401 row inside result:true (as on a real master);
                # on a retry the brokers already done answer 402 (exists)
                rows = r.get("data") or []
                if r["result"] and all(row.get("success") or row.get("errCode") == 402 for row in rows):
                    break
                if time.monotonic() > deadline:
                    raise AssertionError(f"topic {name} not created on {url}: {r.get('errMsg')} {rows}")
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
