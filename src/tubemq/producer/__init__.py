"""The producer's engine and its asyncio client (``tubemq.aio.Producer``); ``SendResult``.

Inside: :mod:`.message` (validation, the job), :mod:`.buffer` (the bounded send buffer),
:mod:`.engine` (every decision of a send, no I/O), :mod:`.loop` (its event-loop driver),
:mod:`.session` (the master session), :mod:`.router` and :mod:`.quality` (partition choice,
bad-broker shielding), :mod:`.stats` (metrics), :mod:`.aio` (the asyncio API). The blocking
``tubemq.Producer`` is :mod:`tubemq.sync.producer`, above the bridge that drives this engine on
callers' threads.
"""

from __future__ import annotations

from ..types import SendResult

__all__ = ["SendResult"]
