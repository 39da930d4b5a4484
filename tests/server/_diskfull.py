"""An injected full disk for the storage layer, in-process or in a server child process.

``FullDisk`` is a :class:`tubemq.server.storage.DiskWriter` that behaves like a disk without room
while it is "full": the first write of an attempt stores half its bytes (a partial record, as a real
disk does when the last blocks run out) and the next one raises ENOSPC; fsync raises ENOSPC too.
A child process reads the state from a control file (``full`` or anything else / absent: room), so
the test can fill and free the disk of a real server it later SIGKILLs.

Run as a script: ``python _diskfull.py CONTROL_FILE <python -m tubemq.server arguments>``.
"""

from __future__ import annotations

import errno
import os
import sys
from pathlib import Path

from tubemq.server import storage


class FullDisk(storage.DiskWriter):
    """A disk that is full while ``full`` is set (or while the control file says ``full``)."""

    def __init__(self, control: Path | None = None, *, fail_fsync: bool = True) -> None:
        self.control = control
        self._full = False
        self.fail_fsync = fail_fsync
        self._partial_done = False
        self.refused_writes = 0
        self.refused_fsyncs = 0

    @property
    def full(self) -> bool:
        if self.control is not None:
            try:
                return self.control.read_text().strip() == "full"
            except OSError:
                return False
        return self._full

    @full.setter
    def full(self, value: bool) -> None:
        self._full = value

    def write(self, fd: int, data: memoryview) -> int:
        if not self.full:
            self._partial_done = False
            return os.write(fd, data)
        if not self._partial_done and len(data) > 1:
            self._partial_done = True
            return os.write(fd, data[: len(data) // 2])
        self._partial_done = False
        self.refused_writes += 1
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def fsync(self, fd: int) -> None:
        if self.fail_fsync and self.full:
            self.refused_fsyncs += 1
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        os.fsync(fd)


def main(argv: list[str]) -> int:
    storage.default_writer = FullDisk(Path(argv[0]))
    from tubemq.server.__main__ import main as server_main

    return server_main(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
