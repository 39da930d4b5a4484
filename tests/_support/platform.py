"""POSIX-only facilities, looked up lazily so that every test module imports (and collects) on Windows.

Never write ``signal.SIGKILL`` at import or collection time (a default argument, a module constant, a
decorator argument): Windows has no such name. Use :func:`kill_signal` when the signal is sent, and mark
the test with :data:`needs_sigkill` / :data:`needs_proc_fs` so it is skipped, with its reason, elsewhere.
tests/test_platform_guards.py imports every test module with both facilities hidden to keep it so.
"""

from __future__ import annotations

import os
import signal
import sys

import pytest

#: SIGKILL exists (POSIX); on Windows ``Popen.kill()`` is TerminateProcess, which is not the same test.
HAS_SIGKILL = hasattr(signal, "SIGKILL") and sys.platform != "win32"
#: /proc/self (Linux): per-process memory and descriptor figures.
HAS_PROC_FS = os.path.isdir("/proc/self")

needs_sigkill = pytest.mark.skipif(
    not HAS_SIGKILL, reason="needs SIGKILL (POSIX): the test kills a process without letting it clean up"
)
needs_proc_fs = pytest.mark.skipif(
    not HAS_PROC_FS, reason="needs /proc/self (Linux) to read the process's own memory or descriptors"
)


def kill_signal() -> int:
    """``signal.SIGKILL``, looked up when a test sends it (only in tests marked :data:`needs_sigkill`)."""
    sig = getattr(signal, "SIGKILL", None)
    if sig is None:
        raise RuntimeError("SIGKILL is not available here: mark the test with _support.needs_sigkill")
    return int(sig)
