"""Client identity strings (docs/PROTOCOL.md §4.5): local IPv4, producer and consumer ids.

The ids follow the Java layout (``<ip>-<pid>-<time>-<rand>-<version>``) with a ``py`` marker so an
operator can tell Python clients apart in the master's admin pages.
"""

from __future__ import annotations

import functools
import os
import random
import socket
import time

from .._version import __version__

_FORBIDDEN = "#@:,"


@functools.lru_cache(maxsize=1)
def local_ip() -> str:
    """The IPv4 address of the interface that routes outwards (no packet is sent), else loopback.

    Why not ``gethostname()``: on many hosts it resolves to 127.0.1.1, which a remote master would
    record as the client's host.
    """
    for probe in ("10.255.255.255", "8.8.8.8"):
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.connect((probe, 1))
                ip = s.getsockname()[0]
            if ip and not ip.startswith("0."):
                return str(ip)
        except OSError:
            continue
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


def _random() -> int:
    return random.randint(0, 2**31 - 1)


def producer_id(ip: str | None = None) -> str:
    """``<ip>-<pid>-<time_ns>-<rand>-py-<ver>`` (Java: ``<ip>-<pid>-<nanoTime>-<rand>-<ver>``)."""
    return f"{ip or local_ip()}-{os.getpid()}-{time.time_ns()}-{_random()}-py-{__version__}"


def consumer_id(group: str, kind: str = "Pull", ip: str | None = None) -> str:
    """``<group>_<ip>-<pid>-<time_ns>-<rand>-<kind>-py-<ver>``; kind Pull, Push or Balance."""
    return f"{group}_{ip or local_ip()}-{os.getpid()}-{time.time_ns()}-{_random()}-{kind}-py-{__version__}"


def check_name(kind: str, value: str) -> None:
    """Names travel inside ``#``/``@``/``:``/``,``-separated strings (§4.0): refuse those characters."""
    bad = [c for c in _FORBIDDEN if c in value]
    if bad:
        raise ValueError(f"{kind} {value!r} must not contain {' '.join(bad)}")


__all__ = ["check_name", "consumer_id", "local_ip", "producer_id"]
