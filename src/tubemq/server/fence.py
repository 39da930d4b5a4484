"""The active master's fence: it stops serving as active once its own event loop was frozen.

Why: a frozen process (SIGSTOP, a stalled VM, a long GC-like pause) still has its listening sockets,
so clients and the standby can connect to it; the standby takes over once the frozen master stops
answering, and when the old one wakes, the requests queued meanwhile would be answered by a master
that still believes it is active. The fence sees the freeze as a gap in its own timer (the loop did
not run for ``lease_s``) and holds every client call to a StandbyException until a replication round
started after the wake has seen the peer: it steps down for a peer that took over (a higher term),
and resumes otherwise. Requests read in the same loop iteration as the wake run before any timer,
so the gap itself (not only the flag the timer sets) holds them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

log = logging.getLogger("tubemq.server.fence")


class Fence:
    """``blocked()`` is True while this master must not answer as active (see the module docstring)."""

    def __init__(self, lease_s: float, on_hold: Callable[[], None], clock: Callable[[], float] = time.monotonic) -> None:
        self.lease_s = lease_s
        self._on_hold = on_hold
        self._clock = clock
        self.last_tick = clock()
        #: monotonic time the current hold began (None: not held)
        self.held_since: float | None = None

    def blocked(self) -> bool:
        return self.held_since is not None or self._clock() - self.last_tick > self.lease_s

    def tick(self) -> None:
        """Called by the timer: a gap longer than the lease starts a hold."""
        now = self._clock()
        gap = now - self.last_tick
        self.last_tick = now
        if gap > self.lease_s and self.held_since is None:
            self.held_since = now
            log.warning("this master's event loop did not run for %.1f s (frozen?): answering as a standby "
                        "until the peer master has been asked who is active", gap)
            self._on_hold()

    def release(self, round_started: float) -> None:
        """A replication round that started at ``round_started`` has seen the peer (or its absence)."""
        if self.held_since is not None and round_started >= self.held_since:
            self.held_since = None
            log.warning("fence released: serving again")

    async def run(self) -> None:
        period = max(0.01, self.lease_s / 8)
        while True:
            await asyncio.sleep(period)
            self.tick()
