"""A tiny dependency-free progress bar for the ``tubemq`` command (count, rate, ETA on stderr).

Why not tqdm: the only runtime dependency of tubemq is protobuf. The bar redraws in place on a
terminal (at most ``max_fps`` times a second, so it costs nothing on the hot path) and stays silent
when stderr is not a terminal, so logs and CI output do not fill up with carriage returns.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import TextIO

__all__ = ["ProgressBar", "format_count", "format_duration", "format_bytes"]


def format_count(n: float) -> str:
    """1234567 -> '1.23M'; short, fixed-ish width numbers for the bar."""
    n = float(n)
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= div:
            return f"{n / div:.2f}{unit}"
    if n != int(n) and abs(n) < 10:
        return f"{n:.1f}"
    return f"{n:.0f}"


def format_bytes(n: float) -> str:
    """Bytes with binary units: 1536 -> '1.5 KiB'."""
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"  # pragma: no cover - loop always returns


def format_duration(seconds: float | None) -> str:
    """Seconds as 'M:SS' or 'H:MM:SS'; '--:--' when unknown."""
    if seconds is None or seconds != seconds or seconds < 0 or seconds > 360000:
        return "--:--"
    s = int(seconds + 0.5)
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class ProgressBar:
    """Thread-safe counter with a throttled stderr rendering.

    ``update(n)`` may be called from any thread (e.g. send callbacks on the client's loop thread).
    ``enabled=None`` means: draw only when ``stream`` is a terminal and ``TUBEMQ_NO_PROGRESS`` is unset.
    """

    def __init__(
        self,
        total: int | None = None,
        label: str = "",
        *,
        unit: str = "msg",
        stream: TextIO | None = None,
        enabled: bool | None = None,
        max_fps: float = 10.0,
        width: int = 28,
    ) -> None:
        self.total = total if total and total > 0 else None
        self.label = label
        self.unit = unit
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            isatty = getattr(self.stream, "isatty", None)
            enabled = bool(isatty and isatty()) and not os.environ.get("TUBEMQ_NO_PROGRESS")
        self.enabled = enabled
        self.width = width
        self._interval = 1.0 / max_fps if max_fps > 0 else 0.0
        self._lock = threading.Lock()
        self.count = 0
        self.extra = ""
        self._start = time.monotonic()
        self._last_draw = 0.0
        self._closed = False
        self._last_len = 0

    # ---- counting

    def update(self, n: int = 1) -> None:
        """Add ``n`` to the count and redraw if the frame interval passed."""
        with self._lock:
            self.count += n
            if not self.enabled or self._closed:
                return
            now = time.monotonic()
            if now - self._last_draw < self._interval:
                return
            self._last_draw = now
            self._draw(now)

    def set_extra(self, text: str) -> None:
        """A short suffix (e.g. 'in-flight 512') shown after the rate."""
        with self._lock:
            self.extra = text

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self._start

    @property
    def rate(self) -> float:
        el = self.elapsed
        return self.count / el if el > 0 else 0.0

    # ---- rendering

    def render(self, now: float | None = None) -> str:
        """The bar text for the current state (also used by tests and non-tty summaries)."""
        now = time.monotonic() if now is None else now
        elapsed = max(now - self._start, 1e-9)
        rate = self.count / elapsed
        parts = []
        if self.label:
            parts.append(self.label)
        if self.total:
            frac = min(self.count / self.total, 1.0)
            filled = int(frac * self.width)
            bar = "#" * filled + "-" * (self.width - filled)
            eta = (self.total - self.count) / rate if rate > 0 else None
            parts.append(f"[{bar}] {frac * 100:5.1f}%")
            parts.append(f"{format_count(self.count)}/{format_count(self.total)} {self.unit}")
            parts.append(f"{format_count(rate)} {self.unit}/s")
            parts.append(f"elapsed {format_duration(elapsed)} eta {format_duration(eta)}")
        else:
            parts.append(f"{format_count(self.count)} {self.unit}")
            parts.append(f"{format_count(rate)} {self.unit}/s")
            parts.append(f"elapsed {format_duration(elapsed)}")
        if self.extra:
            parts.append(self.extra)
        return "  ".join(parts)

    def _draw(self, now: float) -> None:
        text = self.render(now)
        pad = max(self._last_len - len(text), 0)
        self._last_len = len(text)
        try:
            self.stream.write("\r" + text + " " * pad)
            self.stream.flush()
        except (OSError, ValueError):  # closed or broken stderr: stop drawing, never fail the job
            self.enabled = False

    def refresh(self) -> None:
        """Redraw now regardless of the frame interval."""
        with self._lock:
            if self.enabled and not self._closed:
                self._last_draw = time.monotonic()
                self._draw(self._last_draw)

    def close(self) -> None:
        """Draw the final state and end the line (idempotent)."""
        with self._lock:
            if self._closed:
                return
            if self.enabled:
                self._draw(time.monotonic())
                try:
                    self.stream.write("\n")
                    self.stream.flush()
                except (OSError, ValueError):
                    pass
            self._closed = True

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
