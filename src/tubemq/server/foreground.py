"""A server run as a program in the foreground, and the exit status it ends with.

``python -m tubemq.server``, ``tubemq serve`` and the CLI's child servers all run a server this way.
It lives in the server package because the server must not import the CLI (the CLI sits on top and
imports this module, re-exporting its names from :mod:`tubemq.cli.common`).
"""

from __future__ import annotations

import errno
import sys
from typing import Any

EXIT_FAILURE = 1
#: `tubemq serve` (and ``python -m tubemq.server``): a port it was told to use is taken. Its own status
#: so that whoever picked the port (start_on_free_ports) can pick another and start it again.
EXIT_PORT_IN_USE = 3


def port_in_use_status(exc: OSError) -> int:
    """Exit status of a server that could not bind a port: EXIT_PORT_IN_USE when it is taken."""
    return EXIT_PORT_IN_USE if exc.errno == errno.EADDRINUSE else EXIT_FAILURE


def run_server_foreground(config: Any) -> int:
    """Run an embedded server (a ``ServerConfig``) until stopped; a port it cannot bind is one line on
    stderr and the exit status of :func:`port_in_use_status` (``python -m tubemq.server``, child servers)."""
    from ..errors import DataDirLockedError, ServerBindError
    from .cluster import run_foreground  # loads asyncio and the server: only when one is run

    try:
        return run_foreground(config)
    except ServerBindError as exc:  # names role and port; whoever picked the port may pick another
        sys.stderr.write(f"cannot start the server: {exc}\n")
        return port_in_use_status(exc)
    except DataDirLockedError as exc:  # names the directory and the live holder's pid
        sys.stderr.write(f"cannot start the server: {exc}\n")
        return EXIT_FAILURE
