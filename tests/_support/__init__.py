"""Shared test support: one home for what several test packages need.

* :mod:`_support.wait`: bounded polling (``wait_for``, ``waited``) and consumer draining.
* :mod:`_support.servers`: fast server/client timers and embedded-cluster helpers.
* :mod:`_support.produce`: test data straight to a broker with raw send frames; sends around a time split.
* :mod:`_support.serve`: ``tubemq serve`` in a child process, SIGKILLed and restarted on the same ports.
* :mod:`_support.tls`: a self-signed certificate for 127.0.0.1 (the root conftest's ``cert`` fixture).
* :mod:`_support.ports`: is a port taken, an address nothing listens on.
* :mod:`_support.wire`: the protobuf classes of every RPC by method id.
* :mod:`_support.platform`: guards for POSIX-only facilities (SIGKILL, /proc), evaluated lazily so every
  test module imports on every OS.

Test modules import it as ``from _support import ...`` (``tests/`` is on ``sys.path`` through pytest's
rootdir conftest, the same way ``_data`` and ``_java`` are found).
"""

from __future__ import annotations

from .platform import HAS_PROC_FS, HAS_SIGKILL, kill_signal, needs_proc_fs, needs_sigkill
from .servers import FAST_CLIENT, FAST_SERVER, embedded_cluster
from .wait import drain, quiet, wait_for, waited

__all__ = [
    "FAST_CLIENT",
    "FAST_SERVER",
    "HAS_PROC_FS",
    "HAS_SIGKILL",
    "drain",
    "embedded_cluster",
    "kill_signal",
    "needs_proc_fs",
    "needs_sigkill",
    "quiet",
    "wait_for",
    "waited",
]
