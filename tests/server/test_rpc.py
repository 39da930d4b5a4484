"""RPC transport behaviour of the embedded server over real TCP (captures s6d, s6a, s6b)."""

from __future__ import annotations

import asyncio
import os
import random
import socket
import struct
import time
from typing import Any

import pytest

from tubemq import codec
from tubemq.protocol import broker_pb
from tubemq.protocol import constants as C
from tubemq.server.rpc import RpcException, RpcServer, java_parse_error, rewrite_exception_name

from ._raw import RawClient

TOKEN = struct.pack(">I", codec.BEGIN_TOKEN)


def send_body(partition: int = 0, data: bytes = b"x", topic: str = "t1") -> bytes:
    req = broker_pb.SendMessageRequestP2B(
        clientId="p1", topicName=topic, partitionId=partition, data=data, flag=0, checkSum=-1, sentAddr=1
    )
    req.authInfo.visitAuthorizedToken = -2
    return req.SerializeToString()


def frame_from_parts(serial: int, payload: bytes, block: int) -> bytes:
    blocks = [payload[i : i + block] for i in range(0, len(payload), block)]
    out = TOKEN + struct.pack(">II", serial, len(blocks))
    for b in blocks:
        out += struct.pack(">I", len(b)) + b
    return out


def _varint(v: int) -> bytes:
    if v < 0:
        v += 1 << 64
    out = bytearray()
    while v > 0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def raw_request(service_type: int, method: int, body: bytes, timeout: int | None = 10000, ver: int = 3) -> bytes:
    rb = b"\x08" + _varint(method)
    if timeout is not None:
        rb += b"\x10" + _varint(timeout)
    rb += b"\x1a" + _varint(len(body)) + body
    conn = b"\x08\x00"
    header = b"\x08" + _varint(service_type) + b"\x10" + _varint(ver)
    return _varint(len(conn)) + conn + _varint(len(header)) + header + _varint(len(rb)) + rb


@pytest.fixture
def broker(cluster: Any) -> str:
    cluster.create_topic("t1", partitions=3)
    return str(cluster.broker_address)


def append_offset(client: RawClient) -> int:
    return int(client.send("t1", 0, b"probe").appendOffset)


# ---------------------------------------------------------------------------------------------------
# timeouts (§2.7, s6d)


def test_timeout_zero_and_absent_are_processed_but_never_answered(broker: str) -> None:
    with RawClient(broker) as c:
        first = append_offset(c)
        c.send_raw(codec.encode_frame(50, raw_request(3, 13, send_body(), timeout=0)))
        assert c.no_answer(0.3)
        c.send_raw(codec.encode_frame(51, raw_request(3, 13, send_body(), timeout=None)))
        assert c.no_answer(0.3)
        # both were stored: the next append lands 3 entries further
        assert append_offset(c) == first + 3 * C.INDEX_ENTRY_SIZE


def test_negative_timeout_is_dropped_unprocessed(broker: str) -> None:
    with RawClient(broker) as c:
        first = append_offset(c)
        c.send_raw(codec.encode_frame(60, raw_request(3, 13, send_body(), timeout=-1)))
        assert c.no_answer(0.3)
        assert append_offset(c) == first + C.INDEX_ENTRY_SIZE


# ---------------------------------------------------------------------------------------------------
# framing errors (captures README item 5)


def test_bad_begin_token_no_answer_no_close_then_recovers(broker: str) -> None:
    with RawClient(broker) as c:
        bad = bytearray(codec.encode_frame(1, raw_request(3, 13, send_body())))
        bad[3] = 0xFF
        c.send_raw(bytes(bad))
        assert c.no_answer(0.3)
        r = c.send("t1", 0, b"after bad token")
        assert r.success


def test_bad_and_valid_frame_in_one_write_are_both_lost(broker: str) -> None:
    with RawClient(broker) as c:
        bad = bytearray(codec.encode_frame(1, raw_request(3, 13, send_body())))
        bad[3] = 0xFF
        c.send_raw(bytes(bad) + codec.encode_frame(2, raw_request(3, 13, send_body())))
        assert c.no_answer(0.3)
        assert c.send("t1", 0, b"later").success


def test_http_bytes_are_ignored(broker: str) -> None:
    with RawClient(broker) as c:
        c.send_raw(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert c.no_answer(0.3)
        assert c.send("t1", 0, b"later").success


@pytest.mark.parametrize("list_size", [3585, 0x80000000])
def test_bad_list_size_is_ignored_then_recovers(broker: str, list_size: int) -> None:
    with RawClient(broker) as c:
        c.send_raw(TOKEN + struct.pack(">II", 1, list_size) + b"\x00" * 8)
        assert c.no_answer(0.3)
        assert c.send("t1", 0, b"later").success


def test_list_size_zero_mutes_the_connection(broker: str) -> None:
    with RawClient(broker) as c:
        c.send_raw(TOKEN + struct.pack(">II", 1, 0))
        assert c.no_answer(0.2)
        c.send_raw(codec.encode_send_request(2, "p1", "t1", 0, b"x", 0, 1, -2))
        assert c.no_answer(0.4)
        # still connected (not closed), just silent
        c.sock.settimeout(0.1)
        with pytest.raises(TimeoutError):
            c.sock.recv(10)
    with RawClient(broker) as other:  # other connections are unaffected
        assert other.send("t1", 0, b"fine").success


# ---------------------------------------------------------------------------------------------------
# decoder tolerance and serials


@pytest.mark.parametrize("block", [20000, 100])
def test_any_block_size_is_accepted(broker: str, block: int) -> None:
    with RawClient(broker) as c:
        payload = raw_request(3, 13, send_body(data=b"\x01" * 19800))
        c.send_raw(frame_from_parts(7, payload, block))
        r = c.wait(7)
        assert r.status == 0
        assert broker_pb.SendMessageResponseB2P.FromString(r.body).success


def test_trailing_padding_is_ignored(broker: str) -> None:
    with RawClient(broker) as c:
        c.send_raw(codec.encode_frame(9, raw_request(3, 13, send_body(data=b"padded")) + b"\x00" * 9))
        assert broker_pb.SendMessageResponseB2P.FromString(c.wait(9).body).success


def test_pipelined_split_and_odd_serials(broker: str) -> None:
    with RawClient(broker) as c:
        two = codec.encode_send_request(1001, "p", "t1", 1, b"a", 0, 1, -2) + codec.encode_send_request(
            1002, "p", "t1", 2, b"b", 0, 1, -2
        )
        c.send_raw(two)
        assert c.wait(1001).status == 0 and c.wait(1002).status == 0
        split = codec.encode_send_request(1003, "p", "t1", 1, b"split", 0, 1, -2)
        c.send_raw(split[:10])
        assert c.no_answer(0.2)
        c.send_raw(split[10:])
        assert c.wait(1003).status == 0
        for serial in (0, 0xFFFFFFFF, 0x80000000):
            c.send_raw(codec.encode_send_request(serial, "p", "t1", 1, b"s", 0, 1, -2))
            assert c.wait(serial).status == 0


def test_duplicate_serial_both_answered(broker: str) -> None:
    with RawClient(broker) as c:
        frames = [codec.encode_send_request(77, "p", "t1", p, b"dup", 0, 1, -2) for p in (1, 2)]
        c.send_raw(b"".join(frames))
        answers = []
        deadline = time.monotonic() + 5
        while len(answers) < 2 and time.monotonic() < deadline:
            answers += [s for s, _ in c.read_frames(5)]
        assert answers == [77, 77]


def test_response_blocks_never_exceed_8192(cluster: Any) -> None:
    cluster.create_topic("big", partitions=1)
    with RawClient(cluster.broker_address) as c:
        for _ in range(5):
            assert c.send("big", 0, os.urandom(30000)).success
        c.register("g", "big", 0)
        serial = 500
        req = broker_pb.GetMessageRequestC2B(
            clientId="c1", partitionId=0, groupName="g", topicName="big", lastPackConsumed=False
        )
        c.send_raw(codec.encode_request(serial, 2, 17, req.SerializeToString(), timeout_ms=10000))
        raw = b""
        deadline = time.monotonic() + 5
        need = None
        while time.monotonic() < deadline:
            c.sock.settimeout(5)
            raw += c.sock.recv(1 << 20)
            if len(raw) >= 12:
                blocks = struct.unpack(">I", raw[8:12])[0]
                pos, lengths = 12, []
                while len(lengths) < blocks and pos + 4 <= len(raw):
                    n = struct.unpack(">I", raw[pos : pos + 4])[0]
                    if pos + 4 + n > len(raw):
                        break
                    lengths.append(n)
                    pos += 4 + n
                if len(lengths) == blocks:
                    need = lengths
                    break
        assert need is not None and len(need) > 10
        assert all(0 < n <= 8192 for n in need) and all(n == 8192 for n in need[:-1])


# ---------------------------------------------------------------------------------------------------
# envelope and body errors (s6a, s6b)


def answer(c: RawClient, payload: bytes, serial: int = 5) -> codec.Response:
    c.send_raw(codec.encode_frame(serial, payload))
    return c.wait(serial)


def test_envelope_and_dispatch_errors(broker: str) -> None:
    with RawClient(broker) as c:
        # RequestBody without method
        body_no_method = b"\x10\x90\x4e"
        p = b"\x02\x08\x00" + b"\x04\x08\x03\x10\x03" + bytes([len(body_no_method)]) + body_no_method
        r = answer(c, p)
        assert (r.status, r.protocol_ver) == (2, -1)
        assert r.exception_name == C.EXC_INVALID_PROTOBUF
        assert r.message == "IPC server unable to read call parameters:Message missing required fields: method"
        # empty RpcConnHeader
        rb = raw_request(3, 13, send_body())
        r = answer(c, b"\x00" + rb[3:])
        assert r.status == 2 and r.message.endswith("Message missing required fields: flag")
        # empty RequestHeader -> ERROR Service Type is invalid!
        r = answer(c, b"\x02\x08\x00\x00" + rb[8:])
        assert (r.status, r.protocol_ver, r.exception_name, r.message) == (
            1, 3, "java.lang.Exception", "Service Type is invalid!")
        r = answer(c, raw_request(9, 13, send_body()))
        assert r.message == "Service Type is invalid!"
        for m in (11, 19, 99):
            r = answer(c, raw_request(2, m, b""))
            assert (r.status, r.exception_name) == (2, "java.lang.Exception")
            assert r.message == f"IPC server handle request error :Unsupported method ID :{m}"
        get = broker_pb.GetMessageRequestC2B(clientId="c", partitionId=0, groupName="g", topicName="t1")
        r = answer(c, raw_request(3, 17, get.SerializeToString()))
        assert (r.status, r.message) == (1, "Unsupported method 17in service type 3!")
        r = answer(c, raw_request(1, 13, send_body()))
        assert r.message == "Unsupported method 13in service type 1!"
        r = answer(c, raw_request(1, 1, b"\x0a\x01a\x18\x01\x22\x01h"))
        assert (r.status, r.message) == (1, "No service 1 found on the server")


def test_request_body_errors_use_protobuf_java_texts(broker: str) -> None:
    with RawClient(broker) as c:
        req = broker_pb.SendMessageRequestP2B(clientId="p", topicName="t1", partitionId=0, data=b"x", sentAddr=1)
        r = answer(c, raw_request(3, 13, req.SerializePartialToString()))
        assert r.status == 2 and r.exception_name == C.EXC_INVALID_PROTOBUF
        assert r.message == "IPC server handle request error :Message missing required fields: flag, checkSum"
        r = answer(c, raw_request(3, 13, b"\xff\xff\xff\xff"))
        assert r.message.startswith("IPC server handle request error :While parsing a protocol message, the input ended")


def test_go_style_service_type_and_protocol_ver_and_request_flag(broker: str) -> None:
    with RawClient(broker) as c:
        r = answer(c, raw_request(2, 13, send_body(), ver=2))
        assert r.status == 0 and r.protocol_ver == 3
        p = bytearray(raw_request(3, 13, send_body()))
        p[2] = 1  # RpcConnHeader.flag = 1 on a request is ignored
        assert answer(c, bytes(p)).status == 0


def test_handler_crash_is_invocation_target_exception(broker: str) -> None:
    with RawClient(broker) as c:
        req = broker_pb.HeartBeatRequestC2B(clientId="c", groupName="g", readStatus=0, partitionInfo=["garbage"])
        r = c.call(16, req)
        assert (r.status, r.exception_name, r.message) == (1, C.EXC_INVOCATION_TARGET, "")
        assert c.send("t1", 0, b"alive").success


def test_java_parse_error_texts() -> None:
    cls = broker_pb.SendMessageRequestP2B
    assert java_parse_error(b"\x00", cls) == "Protocol message contained an invalid tag (zero)."
    assert java_parse_error(b"\x0f", cls) == "Protocol message tag had invalid wire type."
    assert java_parse_error(b"\x08" + b"\xff" * 11, cls) == "CodedInputStream encountered a malformed varint."
    assert java_parse_error(b"\x0a\x05ab", cls).startswith("While parsing a protocol message")
    assert java_parse_error(b"\x0c", cls) == "Protocol message end-group tag did not match expected tag."
    assert java_parse_error(send_body(), cls) == ""
    assert rewrite_exception_name(C.EXC_STANDBY, 2) == "com.apache.tubemq.corerpc.exception.StandbyException"
    assert rewrite_exception_name(C.EXC_STANDBY, 1) == "com.tencent.tubemq.corerpc.exception.StandbyException"
    assert rewrite_exception_name(C.EXC_STANDBY, 3) == C.EXC_STANDBY
    assert rewrite_exception_name("java.lang.Exception", 2) == "java.lang.Exception"


# ---------------------------------------------------------------------------------------------------
# RpcServer in isolation: RpcException, async handlers, bounds


def _run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 30))


async def _exchange(port: int, frames: bytes, count: int) -> list[tuple[int, codec.Response]]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(frames)
    dec = codec.FrameDecoder()
    out: list[tuple[int, codec.Response]] = []
    while len(out) < count:
        data = await asyncio.wait_for(reader.read(1 << 16), 5)
        assert data
        out += [(s, codec.decode_response(p)) for s, p in dec.feed(data)]
    writer.close()
    return out


def test_rpc_exception_status_and_prefix_rewrite() -> None:
    async def standby(req: Any, ctx: Any) -> Any:
        await asyncio.sleep(0)
        raise RpcException(C.EXC_STANDBY, "not master now")

    def fatal(req: Any, ctx: Any) -> Any:
        raise RpcException("java.lang.Exception", "boom", status=2)

    async def main() -> None:
        srv = RpcServer("t", "127.0.0.1", 0, {1: standby, 3: fatal})
        await srv.start()
        try:
            reg = b"\x0a\x01a\x18\x01\x22\x01h"
            frames = codec.encode_frame(1, raw_request(1, 1, reg, ver=2)) + codec.encode_frame(
                2, raw_request(1, 3, b"\x0a\x01a")
            )
            got = dict(await _exchange(srv.port, frames, 2))
            assert got[1].status == 1 and got[1].protocol_ver == 3
            assert got[1].exception_name == "com.apache.tubemq.corerpc.exception.StandbyException"
            assert got[1].message == "not master now"
            assert got[2].status == 2 and got[2].protocol_ver == -1 and got[2].message == "boom"
        finally:
            await srv.stop()

    _run(main())


def test_connection_cap_and_slow_reader_does_not_stall_others() -> None:
    def echo(req: Any, ctx: Any) -> Any:
        return broker_pb.SendMessageResponseB2P(success=True, errCode=200, errMsg="1")

    async def main() -> None:
        srv = RpcServer("t", "127.0.0.1", 0, {13: echo}, max_connections=2, max_buffered_bytes_per_connection=1 << 16)
        await srv.start()
        try:
            # a client that floods requests and never reads its answers
            slow = socket.create_connection(("127.0.0.1", srv.port))
            slow.setblocking(False)
            frame = codec.encode_send_request(1, "p", "t", 0, b"x" * 50, 0, 1, -2)
            burst = frame * 2000
            sent = 0
            deadline = time.monotonic() + 2
            while time.monotonic() < deadline:
                try:
                    sent += slow.send(burst)
                except BlockingIOError:
                    await asyncio.sleep(0.01)
                    if sent > 4 << 20:
                        break
            # a well-behaved client is still served promptly
            got = await asyncio.wait_for(_exchange(srv.port, frame, 1), 5)
            assert got[0][1].status == 0
            # the cap: a third connection is refused while two are open
            r2 = socket.create_connection(("127.0.0.1", srv.port))
            await asyncio.sleep(0.1)
            third = socket.create_connection(("127.0.0.1", srv.port))
            third.settimeout(5)
            loop = asyncio.get_running_loop()
            data = await loop.run_in_executor(None, lambda: third.recv(10))
            assert data == b""  # closed by the server
            assert srv.rejected_connections >= 1
            for s in (slow, r2, third):
                s.close()
        finally:
            await srv.stop()

    _run(main())


def test_random_garbage_never_crashes_the_server(broker: str) -> None:
    rnd = random.Random(1234)
    for _ in range(20):
        with RawClient(broker) as c:
            for _ in range(10):
                kind = rnd.random()
                if kind < 0.4:
                    data = os.urandom(rnd.randint(1, 300))
                elif kind < 0.8:  # a valid header with a garbage payload
                    body = os.urandom(rnd.randint(0, 200))
                    data = codec.encode_frame(rnd.randint(0, 2**32 - 1), body)
                else:  # a valid envelope with a garbage body
                    data = codec.encode_frame(3, raw_request(rnd.choice([2, 3]), rnd.choice([13, 15, 16, 17, 18]),
                                                             os.urandom(rnd.randint(0, 100))))
                c.send_raw(data)
            c.no_answer(0.05)
    with RawClient(broker) as c:
        assert c.send("t1", 0, b"still alive").success


def test_cap_evicts_muted_then_longest_idle_and_sweep_closes_idle() -> None:
    """Issue 11.7: at the cap a new connection replaces a muted or idle one instead of being refused."""

    def echo(req: Any, ctx: Any) -> Any:
        return broker_pb.SendMessageResponseB2P(success=True, errCode=200, errMsg="1")

    async def closed(sock: socket.socket, wait: float = 2.0) -> bool:
        loop = asyncio.get_running_loop()
        sock.setblocking(False)
        try:
            return await asyncio.wait_for(loop.sock_recv(sock, 1), wait) == b""
        except ConnectionError:
            return True
        except asyncio.TimeoutError:
            return False

    async def main() -> None:
        srv = RpcServer("t", "127.0.0.1", 0, {13: echo}, max_connections=2, idle_timeout_s=60, muted_close_s=60)
        await srv.start()
        try:
            idle = socket.create_connection(("127.0.0.1", srv.port))
            muted = socket.create_connection(("127.0.0.1", srv.port))
            muted.sendall(TOKEN + struct.pack(">II", 1, 0))
            await asyncio.sleep(0.2)
            third = socket.create_connection(("127.0.0.1", srv.port))  # evicts the muted one at once
            assert await closed(muted)
            assert srv.evicted_connections == 1 and srv.connections == 2
            frame = codec.encode_send_request(1, "p", "t", 0, b"x", 0, 1, -2)
            fourth = socket.create_connection(("127.0.0.1", srv.port))  # nobody idle >= 1 s yet: refused
            assert await closed(fourth) and srv.rejected_connections == 1
            fourth.close()
            await asyncio.sleep(1.1)
            got = await asyncio.wait_for(_exchange(srv.port, frame, 1), 5)
            assert got[0][1].status == 0  # admitted: the longest idle connection made room
            assert await closed(idle) and srv.evicted_connections == 2
            srv.idle_timeout_s = 0.0
            assert srv.sweep(time.monotonic() + 1) >= 1  # the sweep closes what stayed idle
            for s in (idle, muted, third):
                s.close()
        finally:
            await srv.stop()

    _run(main())
