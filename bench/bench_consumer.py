"""Consumer throughput: one ``tubemq.Consumer`` draining a backlog (issue 5 speed targets).

Starts ``python -m tubemq.server`` in a subprocess (own process and core, like a real deployment),
creates a topic, loads a backlog of N messages of SIZE bytes with raw pipelined send frames, then one
consumer (server-side balancing, consume_from=earliest) drains it over TCP 127.0.0.1:

* ``iterate``: ``for msg in consumer`` (auto-confirm per batch), touching every message's data;
* ``poll``: ``consumer.poll()`` + ``consumer.confirm(batch)`` with local confirms.

The clock starts at the first message (the rebalance wait is excluded) and stops at the N-th.
Also measures the decode cost of ``codec.decode_get_message_response`` per message (1 message of
100 B per response, and batches of 100), the number the issue compares with Java (2 212 ns) and Go
(1 186 ns).

Usage: python bench/bench_consumer.py [--messages 300000] [--sizes 100,1024] [--stores 4]
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import tempfile
import time
import timeit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_server import create_topic, embedded_server  # noqa: E402

import tubemq  # noqa: E402
from tubemq import codec  # noqa: E402
from tubemq.protocol import broker_pb  # noqa: E402


def load(port: int, topic: str, n: int, size: int, pids: list[int], window: int = 2000) -> float:
    sock = socket.create_connection(("127.0.0.1", port))
    payload = os.urandom(size)
    dec = codec.FrameDecoder()
    sent = acked = 0
    t0 = time.perf_counter()
    while acked < n:
        if sent < n and sent - acked < window:
            end = min(n, acked + window)
            sock.sendall(b"".join(
                codec.encode_send_request(i + 1, "bench-producer", topic, pids[i % len(pids)], payload, 0,
                                          2130706433, -2)
                for i in range(sent, end)))
            sent = end
        for _serial, p in dec.feed(sock.recv(1 << 20)):
            r = codec.decode_response(p)
            if r.status != 0 or not codec.decode_send_response(r.body).success:
                raise SystemExit(f"send failed: {r}")
            acked += 1
    sock.close()
    return n / (time.perf_counter() - t0)


def drain(master: str, group: str, topic: str, n: int, mode: str, concurrency: int) -> tuple[float, float, float]:
    """Returns (msg/s, MB/s, client CPU µs per message) from the first to the n-th message. The CPU
    figure (every thread of this process; the server is another process) moves far less than the rate
    on a machine other work keeps busy."""
    got = 0
    c0 = 0.0
    nbytes = 0
    with tubemq.Consumer(master, group=group, topics=[topic], consume_from="earliest",
                         fetch_concurrency=concurrency, prefetch_batches=2 * concurrency,
                         confirm_in_local=True, heartbeat_period_ms=2000) as c:
        t0 = 0.0
        if mode == "iterate":
            for msg in c:
                if not got:
                    t0, c0 = time.perf_counter(), time.process_time()
                got += 1
                nbytes += len(msg.data)
                if got >= n:
                    break
        else:
            while got < n:
                batch = c.poll(5.0)
                if batch is None:
                    raise SystemExit(f"stalled at {got} of {n}")
                if not got:
                    t0, c0 = time.perf_counter(), time.process_time()
                for msg in batch:
                    nbytes += len(msg.data)
                got += len(batch)
                c.confirm(batch)
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    return got / elapsed, nbytes / elapsed / 1e6, cpu / got * 1e6


def decode_cost(size: int, count: int, attrs: bool) -> float:
    """ns per message of codec.decode_get_message_response for ``count`` messages of ``size`` bytes."""
    attr = "$msgType$=s1,k=v" if attrs else None
    data = codec.encode_payload(os.urandom(size), attr)
    flag = codec.payload_flag(attr)
    msgs = [broker_pb.TransferedMessage(messageId=1000 + i, checkSum=codec.crc32(data), payLoadData=data, flag=flag)
            for i in range(count)]
    body = broker_pb.GetMessageResponseB2C(
        success=True, errCode=200, errMsg="OK!", messages=msgs, currOffset=0, minLimitTime=0,
        escFlowCtrl=False, currDataDlt=0, requireSlow=False, maxOffset=28 * count,
    ).SerializeToString()
    part = codec.Partition(1, "127.0.0.1", 8123, "t", 0)
    res = codec.decode_get_message_response(body, "t", part)
    assert len(res.messages) == count
    loops = max(1, 200000 // count)
    best = min(timeit.repeat(lambda: codec.decode_get_message_response(body, "t", part), number=loops, repeat=5))
    return best / loops / count * 1e9


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=300000)
    ap.add_argument("--sizes", default="100,1024")
    ap.add_argument("--partitions", type=int, default=1)
    ap.add_argument("--stores", type=int, default=4)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--modes", default="iterate,poll")
    args = ap.parse_args()

    print(f"codec: {codec.implementation}, python {sys.version.split()[0]}")
    for count in (1, 100):
        for attrs in (False, True):
            ns = decode_cost(100, count, attrs)
            print(f"decode 100 B x{count:<3} {'attrs' if attrs else 'plain'}: {ns:7.0f} ns/message")

    with tempfile.TemporaryDirectory() as tmp:
        with embedded_server(tmp, "--balance-period-ms", "200") as (master_port, broker_port, admin_port):
            master = f"127.0.0.1:{master_port}"
            for size in (int(s) for s in args.sizes.split(",")):
                n = args.messages if size <= 200 else max(1, args.messages // 3)
                topic = f"bench{size}"
                pids = create_topic(admin_port, topic, args.partitions, args.stores)
                rate = load(broker_port, topic, n, size, pids)
                print(f"\n{size} B: backlog of {n} messages over partitions {pids} loaded at {rate:,.0f} msg/s")
                for mode in args.modes.split(","):
                    msgs, mb, cpu = drain(master, f"g_{topic}_{mode}", topic, n, mode, args.concurrency)
                    print(f"  {mode:8s}: {msgs:12,.0f} msg/s  {mb:7.1f} MB/s  {cpu:6.2f} µs client CPU/msg")


if __name__ == "__main__":
    main()
