"""Local ports: is one taken, and an address nothing listens on (for connection-refused tests)."""

from __future__ import annotations

import socket


def port_busy(port: int) -> bool:
    """Whether something holds ``port`` on 127.0.0.1 (binding it fails)."""
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def dead_address() -> str:
    """``127.0.0.1:<port>`` of a port the OS just handed out and that nothing listens on any more."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"127.0.0.1:{port}"
