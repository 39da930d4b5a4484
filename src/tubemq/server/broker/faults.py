"""A test hook: broker answers the clients must survive, and how the clients reacted.

``inject`` queues spoiled answers per kind ("send" / "fetch"); the handlers ask ``take`` before their
normal answer. Every spoiled answer is logged with the delay until the same client's next call of that
kind, which is how tests check that a client backs off instead of retrying at once.
"""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass

from ...protocol.constants import ErrorCode as E


@dataclass
class Fault:
    code: int
    min_limit_ms: int


@dataclass
class FaultRecord:
    """One spoiled answer (``inject_fault``) and how long the client waited before calling again."""

    kind: str
    code: int
    client: str
    where: str
    at: float
    next_call_after_s: float | None = None


class FaultInjector:
    """Queued spoiled answers per kind and the log of those given."""

    def __init__(self) -> None:
        self._queues: dict[str, collections.deque[Fault]] = {"send": collections.deque(), "fetch": collections.deque()}
        self.log: collections.deque[FaultRecord] = collections.deque(maxlen=1000)
        self._awaiting_followup = 0  # log records whose client has not called again yet

    def inject(self, code: int, count: int = 1, min_limit_ms: int = 0) -> None:
        """Answer the next ``count`` sends (419) or getMessage calls (452, 301) with ``code``.

        419 ``SERVER_RECEIVE_OVERFLOW`` is what a real broker answers when its memory cache cannot take
        the message; 452 ``SERVER_CONSUME_SPEED_LIMIT`` (with ``minLimitTime`` = ``min_limit_ms``) when
        its flow control throttles a consumer; 301 ``MOVED`` when the requested index region was
        deleted.
        """
        if code == E.SERVER_RECEIVE_OVERFLOW:
            kind = "send"
        elif code in (E.SERVER_CONSUME_SPEED_LIMIT, E.MOVED):
            kind = "fetch"
        else:
            raise ValueError(f"inject_fault: {code} is not one of 419, 452, 301")
        if count < 1 or min_limit_ms < 0:
            raise ValueError("inject_fault: count >= 1 and min_limit_ms >= 0")
        self._queues[kind].extend(Fault(int(code), min_limit_ms) for _ in range(count))

    def armed(self, kind: str) -> bool:
        """Whether ``take`` has anything to do for this kind (the handlers' cheap check)."""
        return bool(self._queues[kind]) or self._awaiting_followup > 0

    def take(self, kind: str, client: str, where: str) -> Fault | None:
        """The next spoiled answer of this kind, if any; notes when a faulted client comes back."""
        now = time.monotonic()
        if self._awaiting_followup:
            for rec in self.log:
                if rec.kind == kind and rec.client == client and rec.next_call_after_s is None:
                    rec.next_call_after_s = now - rec.at
                    self._awaiting_followup -= 1
        queue = self._queues[kind]
        if not queue:
            return None
        fault = queue.popleft()
        if len(self.log) == self.log.maxlen and self.log[0].next_call_after_s is None:
            self._awaiting_followup -= 1  # the oldest record falls out unanswered
        self.log.append(FaultRecord(kind, fault.code, client, where, now))
        self._awaiting_followup += 1
        return fault
