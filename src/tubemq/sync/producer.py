"""``tubemq.Producer``: the blocking facade over :class:`tubemq.aio.Producer` (DESIGN.md "Layers").

The asyncio producer runs on the process-wide event-loop thread (:class:`~tubemq._bridge.Portal`);
the thread crossing and the round trips on callers' threads are :class:`~tubemq._bridge.ProducerBridge`'s,
both drivers of the one producer engine:
``send_async`` returns a ``concurrent.futures.Future`` at once (blocking only while ``max_pending``
messages are outstanding: the bounded buffer); ``send`` waits for the broker's answer, doing the
round trip on the calling thread where it can. All methods are thread-safe: many threads may send
through one producer.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from .._bridge import Facade, ProducerBridge, blocking
from ..config import ProducerConfig
from ..producer import aio
from ..producer.message import SendCallback
from ..types import SendResult

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ..config import ProducerOptions


class Producer(Facade[aio.Producer]):
    """Publish messages to TubeMQ.

    ``Producer("h1:8715,h2:8715", rpc_timeout_ms=5000)`` or ``Producer(config=ProducerConfig(...))``
    or ``Producer("tubemq://h1:8715?retries=3")``. Registers with the master on construction (raises
    if no master accepts it after 5 attempts, like Java's ``start()``).
    """

    def __init__(self, master: str | Iterable[str] | None = None, *, config: ProducerConfig | None = None,
                 **options: Unpack[ProducerOptions]) -> None:
        self._open(lambda: aio.Producer(master, config=config, **options), _close_now)
        self.config: ProducerConfig = self._aio.config
        self._bridge = ProducerBridge(self._aio, self._portal.lt)
        self._plain = self._bridge.plain.send  # the common blocking send in one (compiled) call

    @property
    def _core(self) -> Any:
        """The event-loop driver, with the session and the engine (for tests and debugging)."""
        return self._aio.driver

    def partitions(self, topic: str) -> list[Any]:
        """The partitions currently known for a published topic."""
        return self._aio.partitions(topic)

    publish = blocking(aio.Producer.publish)

    def send_async(self, topic: str, data: bytes, *, attributes: Mapping[str, Any] | None = None,
                   stream_id: str | None = None, msg_time: Any = None, key: Any = None,
                   callback: SendCallback | None = None) -> concurrent.futures.Future[SendResult]:
        """Queue a message; the future resolves to a :class:`SendResult` or fails with a TubeMQError.

        ``callback(result, exc)`` (optional) is called exactly once when the message completes:
        ``(SendResult, None)`` or ``(None, exception)``. It runs on the client's event-loop thread
        before the future resolves, so keep it short and never block in it (``send()`` is refused
        there); an exception it raises is logged (``tubemq.producer``) and ignored. Much cheaper than
        ``future.add_done_callback``, which makes every future build its lock and wake the loop. A
        callback may call ``send_async`` again; with the buffer full that raises TubeMQTimeoutError at
        once instead of waiting on the thread that must free the space.
        """
        return self._bridge.send_async(topic, data, attributes, stream_id, msg_time, key, callback)

    def send(self, topic: str, data: bytes, *, attributes: Mapping[str, Any] | None = None,
             stream_id: str | None = None, msg_time: Any = None, key: Any = None,
             timeout: float | None = None) -> SendResult:
        """Send and wait for the broker's answer; raises the failure as a typed TubeMQError.

        The round trip runs on this thread (its own connection to the broker, no event-loop hand-off)
        unless this thread still has ``send_async`` messages outstanding, which it must not overtake,
        or the message needs waiting (first publish, a broker being reconnected), which the loop does.
        ``timeout`` (s): the message's deadline (default ``rpc_timeout_ms``), from the moment it took its
        place in the send buffer: every wait, the answer and any resend fit inside it.
        """
        if attributes is None and stream_id is None and msg_time is None and timeout is None:
            result = self._plain(topic, data, key)  # the common case in one call (None: not that case)
            if result is not None:
                return result
        return self._bridge.send(topic, data, attributes, stream_id, msg_time, key, timeout)

    def flush(self, timeout: float | None = 10.0) -> int:
        """Wait until every queued message is answered; returns the number still pending."""
        if self._portal.released:
            return 0
        return self._portal.run(self._flush(timeout))

    def close(self, timeout: float | None = None) -> None:
        """Flush (up to ``timeout``, default the RPC timeout), fail the rest, deregister. Idempotent."""
        self._portal.close(self._close(timeout))

    async def _flush(self, timeout: float | None) -> int:
        self._bridge.drain_now()  # messages still queued by threads count as pending too
        return await self._aio.flush(timeout)

    async def _close(self, timeout: float | None) -> None:
        """Refuse new sends, wait up to ``timeout`` for every admitted one (the threads' own round
        trips too), cut short the threads' reads still blocked, then close the asyncio producer."""
        bridge = self._bridge
        engine = self._aio.engine
        bridge.drain_now()
        engine.close()
        await self._aio.flush(engine.timeout if timeout is None else timeout)
        bridge.abort()
        await self._aio.close(0)


async def _close_now(client: aio.Producer) -> None:
    """A producer whose start failed: let go of whatever the attempt opened."""
    await client.close(0)


__all__ = ["Producer", "SendResult"]
