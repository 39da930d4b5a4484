"""encode_send_request is byte-identical to SendMessageRequestP2B built with protobuf + encode_request."""

from __future__ import annotations

from types import ModuleType

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tubemq.protocol import broker_pb

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
TEXT = st.text(max_size=40)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    serial=st.integers(0, 2**32 - 1),
    client_id=TEXT,
    topic=TEXT,
    partition_id=INT32,
    data=st.one_of(st.binary(max_size=300), st.binary(min_size=8000, max_size=20000)),
    flag=INT32,
    sent_addr=INT32,
    visit_token=INT64,
    msg_type=st.none() | TEXT,
    msg_time=st.none() | TEXT,
    auth_token=st.none() | TEXT,
    checksum=INT32,
    timeout_ms=st.integers(1, 2**40),
    service_type=st.sampled_from([1, 2, 3]),
    protocol_ver=st.sampled_from([2, 3]),
)
def test_matches_protobuf(impl: ModuleType, serial, client_id, topic, partition_id, data, flag, sent_addr,  # type: ignore[no-untyped-def]
                          visit_token, msg_type, msg_time, auth_token, checksum, timeout_ms, service_type,
                          protocol_ver) -> None:
    req = broker_pb.SendMessageRequestP2B(
        clientId=client_id, topicName=topic, partitionId=partition_id, data=data, flag=flag,
        checkSum=checksum, sentAddr=sent_addr,
        authInfo=broker_pb.AuthorizedInfo(visitAuthorizedToken=visit_token),
    )
    if msg_type is not None:
        req.msgType = msg_type
    if msg_time is not None:
        req.msgTime = msg_time
    if auth_token:
        req.authInfo.authAuthorizedToken = auth_token
    want = impl.encode_request(serial, service_type, 13, req.SerializeToString(), timeout_ms=timeout_ms,
                               protocol_ver=protocol_ver)
    got = impl.encode_send_request(
        serial, client_id, topic, partition_id, data, flag, sent_addr, visit_token, msg_type=msg_type,
        msg_time=msg_time, auth_token=auth_token, checksum=checksum, timeout_ms=timeout_ms,
        service_type=service_type, protocol_ver=protocol_ver,
    )
    assert got == want
    assert impl.encode_send_request(
        serial, client_id, topic, partition_id, memoryview(data), flag, sent_addr, visit_token,
        msg_type=msg_type, msg_time=msg_time, auth_token=auth_token, checksum=checksum, timeout_ms=timeout_ms,
        service_type=service_type, protocol_ver=protocol_ver,
    ) == want


def test_defaults(impl: ModuleType) -> None:
    req = broker_pb.SendMessageRequestP2B(
        clientId="c", topicName="t", partitionId=0, data=b"d", flag=0, checkSum=-1, sentAddr=1,
        authInfo=broker_pb.AuthorizedInfo(visitAuthorizedToken=5),
    )
    want = impl.encode_request(1, 3, 13, req.SerializeToString(), timeout_ms=10000)
    assert impl.encode_send_request(1, "c", "t", 0, b"d", 0, 1, 5) == want


def test_rejects_bad_timeout(impl: ModuleType) -> None:
    import pytest

    for t in (0, -1, None):
        with pytest.raises(ValueError):
            impl.encode_send_request(1, "c", "t", 0, b"d", 0, 1, 5, timeout_ms=t)
        with pytest.raises(ValueError):
            impl.encode_request(1, 3, 13, b"", timeout_ms=t)
