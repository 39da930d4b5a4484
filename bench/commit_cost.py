"""What saving a commit before acknowledging it costs (embedded server, in process).

The broker saves the offsets of a read's commits (method 18) before their answers leave: to the OS
with ``flush="interval"``, fsynced with ``flush="always"``. This measures commit round trips per
second over real TCP on 127.0.0.1 as cycles of one message sent, fetched and committed (one request in
flight, so every commit is its own batch and moves the offset: the worst case), with the save and
with it switched off (the earlier behaviour: offsets saved about once a second by the housekeeping
timer). The difference per cycle is what the save costs a commit.

Usage: python bench/commit_cost.py [--commits 3000] [--groups 1] [--repeat 3]
"""

from __future__ import annotations

import argparse
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

from tubemq import codec
from tubemq.protocol import broker_pb
from tubemq.server import EmbeddedCluster
from tubemq.server.broker import Broker


def _rpc(sock: socket.socket, dec: Any, serial: int, method: int, msg: Any) -> bytes:
    sock.sendall(codec.encode_request(serial, 2, method, msg.SerializeToString(), timeout_ms=10000))
    return _wait(sock, dec)


def _wait(sock: socket.socket, dec: Any) -> bytes:
    while True:
        for _s, p in dec.feed(sock.recv(1 << 20)):
            r = codec.decode_response(p)
            if r.status != 0:
                raise SystemExit(f"rpc failed: {r}")
            return bytes(r.body)


def _no_journal(self: Broker, commits: Any) -> dict[int, Any]:
    """The earlier behaviour: commits answered at once, saved by the timer only."""
    waiters, self._commit_syncs = self._commit_syncs, []
    for fut in waiters:
        fut.set_result(None)
    return {}


def cycles_per_s(flush: str, commits: int, groups: int, save: bool) -> float:
    original = Broker._journal_commits
    if not save:
        Broker._journal_commits = _no_journal  # type: ignore[method-assign]
    try:
        with tempfile.TemporaryDirectory() as tmp, EmbeddedCluster(data_dir=Path(tmp), flush=flush) as cl:
            cl.create_topic("cc", partitions=1)
            host, port = cl.broker_address.rsplit(":", 1)
            sock = socket.create_connection((host, int(port)))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            dec = codec.FrameDecoder()
            serial = 0
            for g in range(groups):
                reg = broker_pb.RegisterRequestC2B(opType=31, clientId=f"c{g}", groupName=f"g{g}", topicName="cc",
                                                   partitionId=0, readStatus=0)
                reg.authInfo.visitAuthorizedToken = -2
                serial += 1
                _rpc(sock, dec, serial, 15, reg)
            fetches = [broker_pb.GetMessageRequestC2B(clientId=f"c{g}", partitionId=0, groupName=f"g{g}", topicName="cc",
                                                      lastPackConsumed=False, manualCommitOffset=False,
                                                      escFlowCtrl=False) for g in range(groups)]
            reqs = [broker_pb.CommitOffsetRequestC2B(clientId=f"c{g}", topicName="cc", partitionId=0, groupName=f"g{g}",
                                                     lastPackConsumed=True) for g in range(groups)]
            t0 = time.perf_counter()
            for i in range(commits):  # one message sent, fetched and committed: every commit moves the offset
                serial += 1
                sock.sendall(codec.encode_send_request(serial, "p1", "cc", 0, b"m-%06d" % i, 0, 2130706433, -2))
                _wait(sock, dec)
                for g in range(groups):
                    serial += 1
                    _rpc(sock, dec, serial, 17, fetches[g])
                    serial += 1
                    _rpc(sock, dec, serial, 18, reqs[g])
            elapsed = time.perf_counter() - t0
            sock.close()
            return commits / elapsed
    finally:
        Broker._journal_commits = original  # type: ignore[method-assign]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commits", type=int, default=3000)
    ap.add_argument("--groups", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3, help="best of this many runs each")
    args = ap.parse_args()
    for flush in ("interval", "always"):
        off = max(cycles_per_s(flush, args.commits, args.groups, save=False) for _ in range(args.repeat))
        on = max(cycles_per_s(flush, args.commits, args.groups, save=True) for _ in range(args.repeat))
        print(f"flush={flush:8s} send+fetch+commit cycles/s: commit saved before its answer {on:7.0f} "
              f"({1e6 / on:5.0f} us), timer only {off:7.0f} ({1e6 / off:5.0f} us): "
              f"+{1e6 / on - 1e6 / off:.0f} us per commit")


if __name__ == "__main__":
    main()
