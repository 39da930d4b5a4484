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


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    except OSError:
        return False
    return True


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
