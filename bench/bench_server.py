"""End-to-end throughput of the embedded server (issue 3 speed targets).

Starts ``python -m tubemq.server`` in a subprocess (the server gets its own process and core, like a
real deployment), then over real TCP on 127.0.0.1:

1. ingest: one pipelined producer sends N messages of SIZE bytes as raw send frames
   (``codec.encode_send_request``) with WINDOW requests in flight, and counts acknowledgements;
2. fetch: one consumer registers from the earliest offset and fetches the backlog with
   ``lastPackConsumed=true`` (commit-on-fetch), decoding every message with ``codec``.

Usage: python bench/bench_server.py [--messages 200000] [--size 100] [--window 2000] [--flush interval]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator

from tubemq import codec
from tubemq.protocol import broker_pb


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"server did not open port {port}")


@contextlib.contextmanager
def embedded_server(data_dir: str, *extra: str, stop_timeout: float = 10) -> Iterator[tuple[int, int, int]]:
    """`python -m tubemq.server` in a child process on free ports: yields (master, broker, admin) ports
    once all three listen; terminates the server on exit."""
    mport, bport, aport = free_port(), free_port(), free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "tubemq.server", "--data-dir", data_dir, "--master-port", str(mport),
         "--broker-port", str(bport), "--admin-port", str(aport), *extra, "--log-level", "WARNING"],
    )
    try:
        for port in (mport, bport, aport):
            wait_port(port)
        yield mport, bport, aport
    finally:
        server.terminate()
        server.wait(stop_timeout)


def create_topic(admin_port: int, topic: str, partitions: int, stores: int = 1) -> list[int]:
    """Create a topic through the admin API; returns its partition ids (store * 10000 + index)."""
    url = (
        f"http://127.0.0.1:{admin_port}/webapi.htm?type=op_modify&method=admin_add_new_topic_record"
        f"&topicName={topic}&numPartitions={partitions}&numTopicStores={stores}&brokerId=1&createUser=bench"
    )
    with urllib.request.urlopen(url, timeout=10) as r:
        body = r.read().decode()
    if '"result":true' not in body.replace(" ", ""):
        raise SystemExit(f"topic creation failed: {body}")
    return [s * 10000 + i for s in range(stores) for i in range(partitions)]


def ingest(port: int, topic: str, n: int, size: int, window: int, partitions: int) -> float:
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    payload = os.urandom(size)
    frames = [
        codec.encode_send_request(i + 1, "bench-producer", topic, i % partitions, payload, 0, 2130706433, -2)
        for i in range(n)
    ]
    dec = codec.FrameDecoder()
    sent = acked = 0
    t0 = time.perf_counter()
    while acked < n:
        if sent < n and sent - acked < window:
            end = min(n, acked + window)
            sock.sendall(b"".join(frames[sent:end]))
            sent = end
        for _serial, p in dec.feed(sock.recv(1 << 20)):
            r = codec.decode_response(p)
            if r.status != 0 or not codec.decode_send_response(r.body).success:
                raise SystemExit(f"send failed: {r}")
            acked += 1
    elapsed = time.perf_counter() - t0
    sock.close()
    return n / elapsed


def fetch(port: int, topic: str, partition: int, expected: int) -> float:
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    dec = codec.FrameDecoder()
    serial = 0

    def call(method: int, msg: object) -> bytes:
        nonlocal serial
        serial += 1
        sock.sendall(codec.encode_request(serial, 2, method, msg.SerializeToString(), timeout_ms=10000))  # type: ignore[attr-defined]
        while True:
            for _s, p in dec.feed(sock.recv(1 << 22)):
                r = codec.decode_response(p)
                if r.status != 0:
                    raise SystemExit(f"rpc failed: {r}")
                return r.body

    reg = broker_pb.RegisterRequestC2B(
        opType=31, clientId="bench-consumer", groupName="bench-group", topicName=topic, partitionId=partition,
        readStatus=0,
    )
    reg.authInfo.visitAuthorizedToken = -2
    broker_pb.RegisterResponseB2C.FromString(call(15, reg))
    req = broker_pb.GetMessageRequestC2B(
        clientId="bench-consumer", partitionId=partition, groupName="bench-group", topicName=topic,
        lastPackConsumed=True, manualCommitOffset=False, escFlowCtrl=False,
    )
    got = 0
    t0 = time.perf_counter()
    while got < expected:
        res = codec.decode_get_message_response(call(17, req), topic)
        if not res.success:
            raise SystemExit(f"fetch stopped early after {got}: {res.err_code} {res.err_msg}")
        got += len(res.messages)
    return got / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=200000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--window", type=int, default=2000)
    ap.add_argument("--flush", default="interval", choices=("always", "interval", "never"))
    args = ap.parse_args()
    data_dir = tempfile.mkdtemp(prefix="tubemq-bench-")
    with embedded_server(data_dir, "--flush", args.flush) as (_, bport, aport):
        create_topic(aport, "bench1", 1)
        create_topic(aport, "bench3", 3)
        print(f"codec implementation: {codec.implementation}; flush={args.flush}; {args.messages} x {args.size} B")
        rate = ingest(bport, "bench1", args.messages, args.size, args.window, 1)
        print(f"ingest, 1 partition : {rate:,.0f} msg/s")
        rate3 = ingest(bport, "bench3", args.messages, args.size, args.window, 3)
        print(f"ingest, 3 partitions: {rate3:,.0f} msg/s")
        frate = fetch(bport, "bench1", 0, args.messages)
        print(f"fetch backlog, 1-partition store: {frate:,.0f} msg/s")
        frate3 = fetch(bport, "bench3", 0, args.messages // 3)
        print(f"fetch backlog, partition 0 of a 3-partition store: {frate3:,.0f} msg/s")


if __name__ == "__main__":
    main()
