"""Where a consumer's iteration stands: the batch being walked and its messages not yielded yet.

Why a class of its own: ``async for``, ``__anext__`` and the blocking ``for msg in consumer`` (its
driver in the bridge) walk the same batches and must share this state; the next batch is confirmed
only once the current one was walked to its end, and a ``break`` leaves the rest for the next loop.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from ..codec import Message
from ..types import Batch

__all__ = ["Iteration"]


class Iteration:
    """The batch an iteration walks (``batch``) and the iterator over its messages (``messages``)."""

    __slots__ = ("batch", "messages")

    def __init__(self) -> None:
        self.batch: Batch | None = None
        self.messages: Iterator[Message] | None = None

    def next_message(self) -> Message | None:
        """The next message of the batch being walked, or None when there is none (no I/O)."""
        msgs = self.messages
        return None if msgs is None else next(msgs, None)

    def finish(self) -> Batch | None:
        """The walk of the current batch is over: it is returned (to be confirmed), and forgotten."""
        done, self.batch, self.messages = self.batch, None, None
        return done

    def begin(self, batch: Batch) -> Iterator[Message]:
        """Walk ``batch`` next; returns its message iterator."""
        self.batch, self.messages = batch, iter(batch.messages)
        return self.messages

    def cut(self, keys: Iterable[str]) -> None:
        """The batch being walked, if of one of ``keys`` (a partition moved by a seek), yields nothing more."""
        batch = self.batch
        if batch is not None and batch.partition.key in set(keys):
            batch.messages.clear()
