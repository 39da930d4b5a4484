"""Raw-frame TubeMQ client for server tests: real TCP, no client library involved."""

from __future__ import annotations

import itertools
import socket
import ssl
import time
from typing import Any

from google.protobuf.message import Message

from tubemq import codec
from tubemq.protocol import broker_pb

TIMEOUT_S = 10.0


class RawClient:
    """Blocking request/response over one TCP connection, matched by serial."""

    def __init__(self, address: str, *, ssl_context: ssl.SSLContext | None = None, source: str | None = None) -> None:
        host, port = address.rsplit(":", 1)
        sock = socket.create_connection(
            (host, int(port)), timeout=TIMEOUT_S, source_address=None if source is None else (source, 0)
        )
        if ssl_context is not None:
            sock = ssl_context.wrap_socket(sock, server_hostname=host)
        self.sock = sock
        self.decoder = codec.FrameDecoder()
        self.serials = itertools.count(1)
        self.pending: dict[int, bytes] = {}

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frames(self, timeout: float = TIMEOUT_S) -> list[tuple[int, bytes]]:
        self.sock.settimeout(timeout)
        data = self.sock.recv(1 << 20)
        if not data:
            raise ConnectionError("server closed the connection")
        return self.decoder.feed(data)

    def wait(self, serial: int, timeout: float = TIMEOUT_S) -> codec.Response:
        deadline = time.monotonic() + timeout
        while serial not in self.pending:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no answer for serial {serial}")
            for s, payload in self.read_frames(left):
                self.pending[s] = payload
        return codec.decode_response(self.pending.pop(serial))

    def no_answer(self, wait: float = 0.3) -> bool:
        """True when nothing arrives within ``wait`` seconds."""
        try:
            frames = self.read_frames(wait)
        except TimeoutError:
            return True
        for s, payload in frames:
            self.pending[s] = payload
        return not frames

    def call(
        self,
        method: int,
        msg: Message | bytes,
        *,
        service_type: int = 2,
        timeout_ms: int = 10000,
        protocol_ver: int = 3,
    ) -> codec.Response:
        serial = next(self.serials)
        body = msg if isinstance(msg, bytes) else msg.SerializePartialToString()
        self.send_raw(
            codec.encode_request(serial, service_type, method, body, timeout_ms=timeout_ms, protocol_ver=protocol_ver)
        )
        return self.wait(serial)

    def rpc(self, method: int, msg: Message, response_type: type[Message], **kw: Any) -> Any:
        r = self.call(method, msg, **kw)
        assert r.status == 0, (r.exception_name, r.message)
        return response_type.FromString(r.body)

    # ---- broker helpers

    def send(self, topic: str, partition: int, data: bytes, *, client_id: str = "p1", msg_type: str | None = None,
             flag: int = 0, checksum: int = -1, service_type: int = 3) -> Any:
        serial = next(self.serials)
        self.send_raw(codec.encode_send_request(serial, client_id, topic, partition, data, flag, 2130706433, -2,
                                                msg_type=msg_type, checksum=checksum, service_type=service_type))
        r = self.wait(serial)
        assert r.status == 0, (r.exception_name, r.message)
        return broker_pb.SendMessageResponseB2P.FromString(r.body)

    def register(self, group: str, topic: str, partition: int, client_id: str = "c1", *, read_status: int = 0,
                 op: int = 31, curr_offset: int | None = None, filters: list[str] | None = None) -> Any:
        req = broker_pb.RegisterRequestC2B(opType=op, clientId=client_id, groupName=group, topicName=topic,
                                           partitionId=partition, readStatus=read_status, qryPriorityId=-2)
        req.authInfo.visitAuthorizedToken = -2
        if curr_offset is not None:
            req.currOffset = curr_offset
        if filters:
            req.filterCondStr.extend(filters)
        return self.rpc(15, req, broker_pb.RegisterResponseB2C)

    def fetch(self, group: str, topic: str, partition: int, client_id: str = "c1", *,
              last_consumed: bool = True, manual: bool = False) -> Any:
        req = broker_pb.GetMessageRequestC2B(clientId=client_id, partitionId=partition, groupName=group,
                                             topicName=topic, lastPackConsumed=last_consumed,
                                             manualCommitOffset=manual, escFlowCtrl=False)
        return self.rpc(17, req, broker_pb.GetMessageResponseB2C)

    def commit(self, group: str, topic: str, partition: int, client_id: str = "c1",
               consumed: bool | None = True) -> Any:
        req = broker_pb.CommitOffsetRequestC2B(clientId=client_id, topicName=topic, partitionId=partition,
                                               groupName=group)
        if consumed is not None:
            req.lastPackConsumed = consumed
        return self.rpc(18, req, broker_pb.CommitOffsetResponseB2C)

    def heartbeat(self, group: str, partitions: list[str], client_id: str = "c1") -> Any:
        req = broker_pb.HeartBeatRequestC2B(clientId=client_id, groupName=group, readStatus=0,
                                            partitionInfo=partitions, qryPriorityId=-2)
        req.authInfo.visitAuthorizedToken = -2
        return self.rpc(16, req, broker_pb.HeartBeatResponseB2C)
