"""Test data for consumer tests: raw send-message frames straight to the broker (no Producer needed).

Frames are pipelined over one socket (sent in chunks, answers matched by serial) so a bench backlog
of a million messages loads in seconds.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterable, Sequence
from typing import Any

from tubemq import codec

CLIENT_ID = "127.0.0.1-1-1-1-py-test"
SENT_ADDR = codec.ip_to_int("127.0.0.1")


def send_raw(
    broker_address: str,
    topic: str,
    items: Iterable[tuple[int, bytes, dict[str, str] | None, str | None]],
    *,
    window: int = 2000,
) -> list[Any]:
    """Send ``(partition_id, body, attributes, msg_type)`` items; returns the SendResponses in order.

    Raises AssertionError when the broker refuses one (tests want to know at once).
    """
    host, port = broker_address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=30)
    decoder = codec.FrameDecoder()
    results: dict[int, Any] = {}
    serial = 0
    pending = 0
    out = bytearray()

    def drain(until: int) -> None:
        nonlocal pending
        while pending > until:
            data = sock.recv(1 << 20)
            assert data, "broker closed the connection"
            for s, payload in decoder.feed(data):
                rsp = codec.decode_response(payload)
                assert rsp.status == 0, f"send {s}: {rsp.exception_name} {rsp.message}"
                results[s] = codec.decode_send_response(rsp.body)
                pending -= 1

    try:
        for pid, body, attrs, msg_type in items:
            if msg_type is not None:
                attr_text = codec.put_system_header(codec.encode_attributes(attrs or {}), msg_type, None)
            else:
                attr_text = codec.encode_attributes(attrs) if attrs else None
            data = codec.encode_payload(body, attr_text)
            flag = codec.payload_flag(attr_text)
            serial += 1
            out += codec.encode_send_request(serial, CLIENT_ID, topic, pid, data, flag, SENT_ADDR, -2,
                                             msg_type=msg_type)
            pending += 1
            if len(out) > 256 * 1024 or pending >= window:
                sock.sendall(out)
                out.clear()
                drain(window // 2)
        if out:
            sock.sendall(out)
        drain(0)
    finally:
        sock.close()
    ordered = [results[i] for i in range(1, serial + 1)]
    for i, r in enumerate(ordered):
        assert r.success, f"message {i}: [{r.err_code}] {r.err_msg}"
    return ordered


def produce(
    cluster: Any,
    topic: str,
    bodies: Sequence[bytes],
    *,
    partitions: int = 1,
    attrs: dict[str, str] | None = None,
    msg_type: str | None = None,
) -> list[Any]:
    """Round-robin ``bodies`` over partitions 0..partitions-1 of ``topic``."""
    return send_raw(cluster.broker_address, topic,
                    ((i % partitions, b, attrs, msg_type) for i, b in enumerate(bodies)))


def send_around_a_split(producer: Any, topic: str, before: Iterable[bytes], after: Iterable[bytes]) -> int:
    """Send ``before``, then ``after`` through ``producer``; returns a millisecond time strictly between the
    two groups' store times (the point a reset-to-time splits them at)."""
    for body in before:
        producer.send(topic, body)
    time.sleep(0.05)
    split = int(time.time() * 1000)
    time.sleep(0.05)
    for body in after:
        producer.send(topic, body)
    return split
