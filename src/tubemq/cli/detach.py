"""``tubemq serve --detach``: start the server in the background and return once it serves.

Why: a shell recipe (``tubemq serve ... &`` then ``tubemq topic create``) races the server's start and
gets "connection refused". With ``--detach`` the command returns only when the server accepts
connections (exit 0, its addresses and pid on stdout), or with the server's own failure (a taken port
exits 3, as in the foreground) and the tail of its log. Running it again for the same data directory
while that server lives says so and exits 0, so the recipe can be run twice.

Once it serves, ``DATA_DIR/tubemq-serve.env`` holds ``export TUBEMQ_MASTER=...`` (and the admin URL): with
``--master-port 0`` (free ports, for a machine where 8715 is taken) ``. DATA_DIR/tubemq-serve.env`` points
the other commands and the programs that read ``$TUBEMQ_MASTER`` at this server. A start that fails
leaves no pid file behind.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .common import EXIT_FAILURE, CliError, note

PID_FILE = "tubemq-serve.pid"
LOG_FILE = "tubemq-serve.log"
ENV_FILE = "tubemq-serve.env"


def _alive(pid: int) -> bool:
    from tubemq._endpoints import _alive as alive

    return alive(pid)


def _published_by(pid: int) -> Any:
    """The endpoints file a server process ``pid`` published once it listened, or None."""
    import json

    from tubemq._endpoints import Endpoints, runtime_dir

    with contextlib.suppress(OSError):
        for path in runtime_dir().glob("*.json"):
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
                if data.get("pid") == pid:
                    return Endpoints(**data)
            except (OSError, ValueError, TypeError):
                continue
    return None


def _running(data_dir: Path) -> int | None:
    """The pid of a live detached server of ``data_dir``, else None (a stale pid file is ignored)."""
    try:
        pid = int((data_dir / PID_FILE).read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        return None
    ep = _published_by(pid) if _alive(pid) else None
    if ep is None or Path(ep.data_dir).resolve() != data_dir.resolve():
        return None
    return pid


def _listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def _tail(path: Path, lines: int = 5) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    kept = [line for line in text.splitlines() if line.strip()][-lines:]
    return "\n".join(kept) or "(empty log)"


def detach(args: Any, argv: Sequence[str]) -> int:
    """Start ``tubemq serve`` (``argv`` without ``--detach``) in its own session; wait until it serves."""
    data_dir: Path = args.data_dir
    data_dir.mkdir(parents=True, exist_ok=True)
    pid = _running(data_dir)
    if pid is not None:
        ep = _published_by(pid)
        note(f"serve: already running for {data_dir} (pid {pid}, master {ep.master if ep else '?'})")
        return 0
    log_path = data_dir / LOG_FILE
    child_argv = [a for a in argv if a != "--detach"]
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tubemq", *child_argv],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
    (data_dir / PID_FILE).write_text(f"{proc.pid}\n", encoding="utf-8")
    (data_dir / ENV_FILE).unlink(missing_ok=True)  # a previous server's addresses
    deadline = time.monotonic() + args.ready_timeout
    while True:
        code = proc.poll()
        if code is not None:
            (data_dir / PID_FILE).unlink(missing_ok=True)
            raise CliError(f"the server exited ({code}) before it was ready; {log_path}:\n{_tail(log_path)}",
                           code or EXIT_FAILURE)
        ready = (_listening(args.host, args.broker_port) if args.role == "broker" and args.broker_port
                 else _published_by(proc.pid) is not None)
        if ready:
            break
        if time.monotonic() > deadline:
            proc.kill()
            proc.wait(10)
            (data_dir / PID_FILE).unlink(missing_ok=True)
            raise CliError(f"the server was not ready within {args.ready_timeout:g} s (see {log_path})")
        time.sleep(0.1)
    ep = _published_by(proc.pid)
    where = f"master {ep.master}, admin {ep.admin_url}" if ep is not None else f"broker port {args.broker_port}"
    env = ""
    if ep is not None:
        (data_dir / ENV_FILE).write_text(f"export TUBEMQ_MASTER={ep.master}\nexport TUBEMQ_ADMIN_URL={ep.admin_url}\n",
                                         encoding="utf-8")
        env = f"; environment: . {data_dir / ENV_FILE}"
    print(f"tubemq serve: ready ({where}, pid {proc.pid}); log: {log_path}{env}; stop: kill {proc.pid}",
          flush=True)
    return 0
