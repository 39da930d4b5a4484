"""Unit tests (no network) of the consumer engine's driver protocol: a lease's answer is judged only
when read on a link that presented the consumer's tokens, whichever driver read it."""

from __future__ import annotations

import asyncio

import pytest

from tubemq.codec import Partition
from tubemq.config import ConsumerConfig
from tubemq.consumer.core import ConsumerCore
from tubemq.consumer.links import Links
from tubemq.errors import AuthenticationError
from tubemq.protocol import broker_pb
from tubemq.protocol.constants import ErrorCode


def _core() -> ConsumerCore:
    return ConsumerCore(ConsumerConfig.build("127.0.0.1:1", "g", ["t"]))


def _leased(core: ConsumerCore) -> object:
    slot = core.table.add(Partition(1, "127.0.0.1", 8123, "t", 0))
    core.table.start_register(slot)
    core.table.registered_ok(slot, 0, 280)
    lease = core.engine.lease()
    assert lease is not None and lease.key == "1:t:0"
    return lease


def _not_found() -> bytes:
    return broker_pb.GetMessageResponseB2C(success=False, errCode=int(ErrorCode.NOT_FOUND), errMsg="none",
                                           currOffset=0, maxOffset=280).SerializeToString()


class _Link:
    """Stands for a connection: only its identity matters to the engine."""


def test_an_answer_read_on_a_link_that_never_presented_the_tokens_is_refused() -> None:
    async def main() -> None:
        core = _core()
        lease = _leased(core)
        link = _Link()
        assert core.engine.needs_opening(link)
        with pytest.raises(RuntimeError, match="never presented"):
            core.engine.answer(lease, link, _not_found(), None, 0.0)  # type: ignore[arg-type]

    asyncio.run(main())


def test_the_opening_carries_the_tokens_and_its_answer_opens_the_link() -> None:
    async def main() -> None:
        core = _core()
        lease = _leased(core)
        core.session.visit_token = 4242
        req = broker_pb.HeartBeatRequestC2B.FromString(core.engine.opening(lease.address))  # type: ignore[attr-defined]
        assert req.authInfo.visitAuthorizedToken == 4242 and list(req.partitionInfo) == [str(lease.slot.partition)]  # type: ignore[attr-defined]
        link = _Link()
        refused = broker_pb.HeartBeatResponseB2C(success=False, errCode=int(ErrorCode.CERTIFICATE_FAILURE),
                                                 errMsg="invalid visit token").SerializeToString()
        assert isinstance(core.engine.opened(link, refused, None), AuthenticationError)
        assert core.engine.needs_opening(link)
        ok = broker_pb.HeartBeatResponseB2C(success=True, errCode=200, errMsg="OK").SerializeToString()
        assert core.engine.opened(link, ok, None) is None and not core.engine.needs_opening(link)
        assert core.engine.answer(lease, link, _not_found(), None, 0.0) is None  # type: ignore[arg-type]
        assert core.fetcher.empty_fetches == 1 and core.fetcher.in_flight == 0

    asyncio.run(main())


def test_a_link_a_register_was_accepted_on_needs_no_opening() -> None:
    links, link = Links(), _Link()
    assert links.needs_opening(link)
    links.presented(link)
    assert not links.needs_opening(link)
