"""Cancel-safe waits and bounded task shutdown, for every background loop of the clients and the server.

Why this exists: on Python < 3.12 ``asyncio.wait_for`` returns (or raises) the inner call's outcome
when its caller is cancelled in the same loop step the inner call finishes (bpo-42130, gh-86296; fixed
in 3.12, where ``wait_for`` is built on ``asyncio.timeout``). A server loop that calls it every period
(a standby's sync call to a peer that refuses connections, a broker's heartbeat) then loses the
``cancel()`` of the server's stop and runs on, and the stop that awaits it never returns. On a loaded
machine that window is hit now and then: "the cluster's stop did not answer within 30 s".
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Awaitable, Iterable
from typing import Any, TypeVar

log = logging.getLogger("tubemq.tasks")

T = TypeVar("T")

#: A task still running this long after its cancel is cancelled again (it caught the first one).
RECANCEL_S = 1.0
#: How long a stop waits for its tasks before it leaves the rest running (and logs them).
STOP_PATIENCE_S = 10.0


def wake_all(waiters: Iterable[asyncio.Future[Any]]) -> None:
    """Resolve every waiter still pending with None: the waiters re-check their condition (room, a
    resume, an idle buffer) themselves, so a waiter cancelled meanwhile is simply passed over."""
    for w in waiters:
        if not w.done():
            w.set_result(None)


def _retrieve(task: asyncio.Future[Any]) -> None:
    """Mark the outcome of an abandoned inner call as seen (no "exception was never retrieved")."""
    if not task.cancelled():
        task.exception()


async def wait_for(aw: Awaitable[T], timeout: float | None) -> T:
    """``asyncio.wait_for`` whose caller's cancel always wins: a cancelled caller gets ``CancelledError``
    even when the inner call finished in the same step; on time-out the inner call is cancelled and
    waited for, then ``asyncio.TimeoutError``."""
    if sys.version_info >= (3, 12):
        return await asyncio.wait_for(aw, timeout)
    task = asyncio.ensure_future(aw)
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout)
    except asyncio.CancelledError:
        task.cancel()
        task.add_done_callback(_retrieve)
        raise
    if not done:
        task.cancel()
        await asyncio.wait({task})  # like wait_for: the inner call no longer runs when this returns
        if task.cancelled():
            raise asyncio.TimeoutError
    return task.result()


async def cancel_and_wait(tasks: Iterable[asyncio.Future[Any]], patience_s: float = STOP_PATIENCE_S) -> None:
    """Cancel ``tasks`` and wait until they end, cancelling again every ``RECANCEL_S`` any task that
    swallowed its cancel, for at most ``patience_s`` (then the rest are logged and left behind).
    An exception a task ended with is logged, not raised: a stop must finish."""
    tasks = list(tasks)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + patience_s
    pending = {t for t in tasks if not t.done()}
    first = True
    while pending:
        if not first:
            log.warning("%d task(s) still running after their cancel: cancelling again (%s)",
                        len(pending), ", ".join(sorted(_name(t) for t in pending)))
        first = False
        for t in pending:
            t.cancel()
        left = deadline - loop.time()
        if left <= 0:
            log.error("task(s) ignored their cancel for %.0f s and are left running: %s", patience_s,
                      ", ".join(sorted(_name(t) for t in pending)))
            break
        _, pending = await asyncio.wait(pending, timeout=min(RECANCEL_S, left))
    for t in tasks:
        if t.done() and not t.cancelled() and t.exception() is not None:
            log.warning("task %s ended with an error", _name(t), exc_info=t.exception())


def _name(task: asyncio.Future[Any]) -> str:
    return task.get_name() if isinstance(task, asyncio.Task) else repr(task)
