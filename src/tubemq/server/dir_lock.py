"""One server per data directory: an OS lock on ``<data_dir>/tubemq.lock`` held while a server runs.

Why an OS lock and not a pid file: the kernel releases it when the holder dies, whatever the way
(SIGKILL included), so a stale file never blocks a restart and two live servers can never both hold
it. The holder writes its pid into the file so the refusal can name it. POSIX uses ``flock`` (per
open file: a second server in the same process is refused too); Windows locks one byte with
``msvcrt.locking`` past the pid text, so the pid stays readable by the refused process.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from pathlib import Path

from ..errors import DataDirLockedError

log = logging.getLogger("tubemq.server.dir_lock")

LOCK_FILE = "tubemq.lock"
#: where the Windows lock byte sits (beyond any pid text)
_WIN_LOCK_AT = 4096


def _try_lock(fd: int) -> bool:
    if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
        import msvcrt

        os.lseek(fd, _WIN_LOCK_AT, os.SEEK_SET)
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _holder_pid(path: Path) -> int:
    with contextlib.suppress(OSError, ValueError):
        return int(path.read_bytes()[:32].split(b"\n", 1)[0].strip() or b"0")
    return 0


class DataDirLock:
    """The held lock of one data directory; :meth:`release` (or the process's death) frees it."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / LOCK_FILE
        self._fd = -1

    @classmethod
    def acquire(cls, directory: Path) -> DataDirLock:
        """Take the directory's lock or raise :class:`DataDirLockedError` naming the holder's pid."""
        directory.mkdir(parents=True, exist_ok=True)
        lock = cls(directory)
        fd = os.open(lock.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if not _try_lock(fd):
                raise DataDirLockedError(str(directory), _holder_pid(lock.path))
            os.ftruncate(fd, 0)
            os.lseek(fd, 0, os.SEEK_SET)  # os.pwrite is POSIX only
            os.write(fd, f"{os.getpid()}\n".encode())
        except BaseException:
            os.close(fd)
            raise
        lock._fd = fd
        log.debug("locked %s (pid %d)", directory, os.getpid())
        return lock

    @property
    def held(self) -> bool:
        return self._fd >= 0

    def release(self) -> None:
        """Free the lock (closing the file frees it; the file stays, a stale one blocks nobody)."""
        fd, self._fd = self._fd, -1
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            os.close(fd)
