"""``tubemq._endpoints._alive``: a liveness check that never disturbs the process it asks about.

On Windows ``os.kill(pid, 0)`` is not a probe (it terminates the process), so the check goes through
OpenProcess / WaitForSingleObject there. That branch runs here against a recorded kernel32 stand-in
(the ctypes binding itself only loads on Windows); the POSIX branch runs against real processes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

from tubemq import _endpoints


class FakeKernel32:
    """What OpenProcess / WaitForSingleObject answer for a few pids; records every call."""

    def __init__(self, processes: dict[int, int], denied: frozenset[int] = frozenset()) -> None:
        self.processes = processes  # pid -> WaitForSingleObject(h, 0): 0x102 running, 0 exited, 0xFFFFFFFF failed
        self.denied = denied
        self.calls: list[tuple[str, int]] = []
        self.open_handles: set[int] = set()
        self._error = 0

    def open(self, pid: int) -> Any:
        self.calls.append(("open", pid))
        if pid in self.denied:
            self._error = 5  # ERROR_ACCESS_DENIED
            return None
        if pid not in self.processes:
            self._error = 87  # ERROR_INVALID_PARAMETER: no such process
            return None
        self.open_handles.add(pid)
        return pid

    def last_error(self) -> int:
        return self._error

    def wait_now(self, handle: Any) -> int:
        self.calls.append(("wait_now", handle))
        return self.processes[handle]

    def close(self, handle: Any) -> None:
        self.calls.append(("close", handle))
        self.open_handles.discard(handle)


@pytest.fixture
def windows(monkeypatch: pytest.MonkeyPatch) -> FakeKernel32:
    """``_alive`` on its Windows branch, with os.kill made to fail the test if it is ever called."""
    fake = FakeKernel32({100: 0x102, 101: 0, 102: 0xFFFFFFFF}, denied=frozenset({103}))

    def no_kill(pid: int, sig: int) -> None:
        raise AssertionError(f"os.kill({pid}, {sig}) on Windows would terminate the process")

    monkeypatch.setattr(_endpoints, "_ON_WINDOWS", True)
    monkeypatch.setattr(_endpoints, "_WinApi", lambda: fake)
    monkeypatch.setattr(os, "kill", no_kill)
    return fake


def test_windows_branch_asks_openprocess_and_never_signals(windows: FakeKernel32) -> None:
    assert _endpoints._alive(100) is True  # WAIT_TIMEOUT: running
    assert _endpoints._alive(101) is False  # signalled: exited (a handle held elsewhere keeps the pid)
    assert _endpoints._alive(102) is True  # WAIT_FAILED on an opened process: it exists
    assert _endpoints._alive(103) is True  # access denied: exists, another user's
    assert _endpoints._alive(104) is False  # no such process
    assert _endpoints._alive(0) is False and _endpoints._alive(-1) is False
    assert windows.open_handles == set()  # every handle closed
    assert [c for c in windows.calls if c[0] == "open"] == [("open", p) for p in (100, 101, 102, 103, 104)]


def test_windows_branch_without_kernel32_says_not_alive(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> Any:
        raise OSError("kernel32 not loadable")

    monkeypatch.setattr(_endpoints, "_ON_WINDOWS", True)
    monkeypatch.setattr(_endpoints, "_WinApi", broken)
    monkeypatch.setattr(os, "kill", lambda *a: pytest.fail("os.kill called on the Windows branch"))
    assert _endpoints._alive(os.getpid()) is False


@pytest.mark.skipif(sys.platform == "win32", reason="the POSIX branch")
def test_posix_branch_on_real_processes() -> None:
    assert _endpoints._alive(os.getpid()) is True
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        assert _endpoints._alive(child.pid) is True
        assert child.poll() is None  # the probe left it running
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(30)
    assert _endpoints._alive(child.pid) is False  # exited and reaped


@pytest.mark.skipif(sys.platform != "win32", reason="the real kernel32 binding loads only on Windows")
def test_windows_binding_on_real_processes() -> None:
    assert _endpoints._alive(os.getpid()) is True
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        assert _endpoints._alive(child.pid) is True
        assert child.poll() is None  # still running: the check did not terminate it
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(30)
