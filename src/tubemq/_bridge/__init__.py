"""All thread crossing of the blocking API, in one place (DESIGN.md: sync over asyncio).

* :mod:`.portal`: a blocking handle on an asyncio client on the shared loop thread (build, start,
  run coroutines, iterate, close) and the facade base class of ``Producer`` / ``Consumer`` /
  ``BoundConsumer``;
* :mod:`.producer`: the blocking producer's routes: ``send`` doing its own round trip on the caller's
  thread (:mod:`.channel`), ``send_async`` handing jobs to the loop in batches;
* :mod:`.consumer`: the blocking consumer's iterator fetching on its own thread (``DirectFeed``);
  :mod:`.feed`: its loop-fed fallback (``BatchFeed``, with TLS);
* :mod:`.futures`: what threads wait on (``SendFuture``, ``Waiter``);
* :mod:`.dispatch`: blocking callbacks run in order on a thread of their own.

The asyncio clients (:mod:`tubemq.aio`) know nothing of threads.
"""

from __future__ import annotations

from .dispatch import Dispatcher
from .futures import SendFuture, Waiter
from .portal import AsyncClient, Facade, Portal, blocking, to_thread
from .producer import ProducerBridge  # noqa: E402

__all__ = ["AsyncClient", "Dispatcher", "Facade", "Portal", "ProducerBridge", "SendFuture", "Waiter", "blocking",
           "to_thread"]
