"""Where a running embedded server's admin API is, for tools that only know its master address.

The TubeMQ protocol has no RPC that names the admin endpoint, and guessing "host of the master, port
8080" talks to whatever else listens there. So ``tubemq serve`` (``run_foreground``) publishes its
addresses in a small JSON file named after the master address, in a per-user runtime directory
(``$TUBEMQ_RUNTIME_DIR``, else ``$XDG_RUNTIME_DIR/tubemq``, else ``~/.cache/tubemq/run``), and removes it on
a clean stop. ``lookup("127.0.0.1:8715")`` returns those addresses while that process is alive, else
None (a real master, a server on another machine, or one that died): then the caller must be told the
admin URL (``--admin-url``) instead of guessing.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger("tubemq.server.endpoints")

ENV_DIR = "TUBEMQ_RUNTIME_DIR"


@dataclass(frozen=True)
class Endpoints:
    """The addresses one embedded server process serves."""

    master: str
    admin_url: str
    brokers: list[str] = field(default_factory=list)
    pid: int = 0
    data_dir: str = ""


def runtime_dir() -> Path:
    env = os.environ.get(ENV_DIR)
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg:
        return Path(xdg) / "tubemq"
    return Path.home() / ".cache" / "tubemq" / "run"


def _file_for(master_address: str) -> Path:
    safe = master_address.strip().replace(":", "_").replace("/", "_")
    return runtime_dir() / f"{safe}.json"


def publish(ep: Endpoints) -> Path | None:
    """Write the endpoints file of this process; None (logged) when the directory is not writable."""
    path = _file_for(ep.master)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(asdict(ep), indent=1), encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        log.warning("cannot publish the server's endpoints in %s: %s", path.parent, exc)
        return None
    return path


def withdraw(path: Path | None) -> None:
    if path is not None:
        with contextlib.suppress(OSError):
            path.unlink()


#: Windows: signal 0 is not a probe there (``os.kill`` calls TerminateProcess for any value but
#: CTRL_C_EVENT / CTRL_BREAK_EVENT), so liveness is asked of OpenProcess + WaitForSingleObject instead
#: (not GetExitCodeProcess: a process may exit with code 259, STILL_ACTIVE).
_ON_WINDOWS = sys.platform == "win32"
_ERROR_ACCESS_DENIED = 5
_SYNCHRONIZE = 0x00100000
_PROCESS_QUERY_LIMITED_INFORMATION = 0x1000
_WAIT_OBJECT_0 = 0
_WAIT_TIMEOUT = 0x102


class _WinApi:
    """The kernel32 calls the Windows check needs (ctypes, loaded only on Windows)."""

    def __init__(self) -> None:
        import ctypes
        from ctypes import wintypes

        self._ctypes = ctypes
        k32 = getattr(ctypes, "WinDLL")("kernel32", use_last_error=True)  # noqa: B009 - Windows-only name
        k32.OpenProcess.argtypes = [wintypes.DWORD, wintypes.BOOL, wintypes.DWORD]
        k32.OpenProcess.restype = wintypes.HANDLE
        k32.WaitForSingleObject.argtypes = [wintypes.HANDLE, wintypes.DWORD]
        k32.WaitForSingleObject.restype = wintypes.DWORD
        k32.CloseHandle.argtypes = [wintypes.HANDLE]
        self._k32 = k32

    def open(self, pid: int) -> Any:
        return self._k32.OpenProcess(_PROCESS_QUERY_LIMITED_INFORMATION | _SYNCHRONIZE, False, pid) or None

    def last_error(self) -> int:
        return int(getattr(self._ctypes, "get_last_error")())  # noqa: B009 - Windows-only name

    def wait_now(self, handle: Any) -> int:
        """WaitForSingleObject with a zero timeout: WAIT_TIMEOUT while the process runs."""
        return int(self._k32.WaitForSingleObject(handle, 0))

    def close(self, handle: Any) -> None:
        self._k32.CloseHandle(handle)


def _alive_windows(pid: int, api: Any) -> bool:
    """OpenProcess on a pid that does not exist fails with ERROR_INVALID_PARAMETER; access denied means
    it exists (another user's); an open process has exited once its handle is signalled."""
    handle = api.open(pid)
    if handle is None:
        return bool(api.last_error() == _ERROR_ACCESS_DENIED)
    try:
        return api.wait_now(handle) != _WAIT_OBJECT_0  # WAIT_TIMEOUT: running; WAIT_FAILED: it exists
    finally:
        api.close(handle)


def _alive_posix(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: existence and permission check only
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    except OSError:
        return False
    return True


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists, without disturbing it on any platform."""
    if pid <= 0:
        return False
    if _ON_WINDOWS:
        try:
            return _alive_windows(pid, _WinApi())
        except (OSError, AttributeError) as exc:  # no usable kernel32: unknown, so not "published and alive"
            log.debug("cannot check process %d: %s", pid, exc)
            return False
    return _alive_posix(pid)


def lookup(master_address: str) -> Endpoints | None:
    """The endpoints published for ``master_address`` by a live local server process, or None."""
    path = _file_for(master_address)
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
        ep = Endpoints(**data)
    except (OSError, ValueError, TypeError):
        return None
    if not _alive(ep.pid):
        return None
    return ep
