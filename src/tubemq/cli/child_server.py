"""``python -m tubemq.cli.child_server CONFIG_JSON``: the embedded server as a child of ``tubemq demo``/``bench``.

The same server as ``tubemq serve`` (``run_foreground``), plus a watchdog: the parent keeps our stdin
open, and when it closes — the parent exited, even by ``kill -9`` — we shut down cleanly (and remove
the parent's temporary directory, ``cleanup_dir``), so a temporary server never outlives the command
that started it.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import sys
import threading

_orphaned = threading.Event()


def _watch_stdin() -> None:
    try:
        while sys.stdin.buffer.read(4096):
            pass
    except (OSError, ValueError):
        pass
    _orphaned.set()
    os.kill(os.getpid(), signal.SIGTERM)  # run_foreground turns it into a clean shutdown


def main(argv: list[str] | None = None) -> int:
    from tubemq.errors import ConfigError
    from tubemq.server import ServerConfig

    from .common import run_server_foreground

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m tubemq.cli.child_server CONFIG_JSON", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        options = json.loads(args[0])
        cleanup = options.pop("cleanup_dir", None)
        config = ServerConfig(**options)
    except (ConfigError, TypeError, ValueError) as exc:
        print(f"bad server config: {exc}", file=sys.stderr)
        return 2
    threading.Thread(target=_watch_stdin, name="tubemq-parent-watch", daemon=True).start()
    code = run_server_foreground(config)  # EXIT_PORT_IN_USE: the parent picks other ports
    if cleanup and _orphaned.is_set():
        # the parent died without cleaning up its temporary directory: do it for it
        shutil.rmtree(cleanup, ignore_errors=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
