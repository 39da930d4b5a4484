"""The producer: ``Producer`` (sync/threaded), ``tubemq.aio.Producer`` (asyncio), ``SendResult``.

Inside: :mod:`.message` (validation, the job), :mod:`.buffer` (the bounded send buffer),
:mod:`.core` (the dispatcher), :mod:`.session` (the master session), :mod:`.router` and
:mod:`.quality` (partition choice, bad-broker shielding), :mod:`.aio` / :mod:`.sync` (the two APIs).
``Producer`` is imported on first use: the blocking facade sits above :mod:`tubemq._bridge`, which
itself builds on the modules here, so importing one of them must not pull the facade in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..types import SendResult

if TYPE_CHECKING:
    from .sync import Producer


def __getattr__(name: str) -> Any:
    if name == "Producer":
        from .sync import Producer

        globals()["Producer"] = Producer
        return Producer
    raise AttributeError(f"module 'tubemq.producer' has no attribute {name!r}")


__all__ = ["Producer", "SendResult"]
