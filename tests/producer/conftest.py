"""Producer test helpers: read back what the broker stored (raw broker RPCs over real TCP)."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Iterable
from typing import Any

import pytest

from tubemq import codec
from tubemq.net.connection import Connection
from tubemq.protocol import broker_pb
from tubemq.protocol.constants import MSG_OPTYPE_REGISTER, ServiceType

_groups = itertools.count()


async def _read_partition(conn: Connection, topic: str, pid: int, limit: int) -> list[codec.Message]:
    group = f"readback{next(_groups)}x{int(time.time() * 1000) % 100000}"
    cid = f"{group}_127.0.0.1-1-1-1-Pull-py-test"
    reg = broker_pb.RegisterRequestC2B(
        opType=MSG_OPTYPE_REGISTER, clientId=cid, groupName=group, topicName=topic, partitionId=pid,
        readStatus=0, currOffset=0, qryPriorityId=-2, authInfo=broker_pb.AuthorizedInfo(visitAuthorizedToken=-2),
    )
    rsp = broker_pb.RegisterResponseB2C.FromString(
        await conn.call(ServiceType.BROKER_READ, 15, reg.SerializeToString(), timeout_ms=10000)
    )
    assert rsp.success, (rsp.errCode, rsp.errMsg)
    out: list[codec.Message] = []
    first = True
    empty = 0
    for _ in range(limit):
        req = broker_pb.GetMessageRequestC2B(
            clientId=cid, partitionId=pid, groupName=group, topicName=topic, lastPackConsumed=not first,
            manualCommitOffset=False, escFlowCtrl=False,
        )
        first = False
        body = await conn.call(ServiceType.BROKER_READ, 17, req.SerializeToString(), timeout_ms=10000)
        res = codec.decode_get_message_response(body, topic)
        if res.success and res.messages:
            out.extend(res.messages)
            empty = 0
            continue
        empty += 1
        if (not res.success and res.err_code == 404) or empty > 3:
            break
    return out


def read_stored(broker_address: str, topic: str, partition_ids: Iterable[int], limit: int = 10000
                ) -> dict[int, list[codec.Message]]:
    """Every message stored in the given partitions, by partition id (a fresh group each time)."""

    async def main() -> dict[int, list[codec.Message]]:
        conn = await Connection.open(broker_address)
        try:
            return {pid: await _read_partition(conn, topic, pid, limit) for pid in partition_ids}
        finally:
            await conn.close()

    async def guarded() -> dict[int, list[codec.Message]]:
        return await asyncio.wait_for(main(), 60)

    return asyncio.run(guarded())


def wait_for(cond: Callable[[], Any], timeout: float = 10.0, interval: float = 0.02) -> Any:
    """Poll ``cond`` until truthy (bounded); returns its value or fails the test."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {timeout} s")
        time.sleep(interval)


@pytest.fixture
def stored() -> Callable[..., dict[int, list[codec.Message]]]:
    return read_stored


@pytest.fixture
def poll() -> Callable[..., Any]:
    return wait_for
