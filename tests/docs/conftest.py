"""A `tubemq serve` for the documentation's code blocks, as a reader starts it (see tests/docs/blocks.py)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from _support import kill_signal

#: The ports of `tubemq serve` with its defaults: master, broker, admin.
SERVE_PORTS = (8715, 8123, 8080)


def doc_env(**extra: str) -> dict[str, str]:
    """The environment of a reader's shell: this interpreter's scripts first on PATH, no TUBEMQ_* set."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUBEMQ_")}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def run_in_own_session(argv: Sequence[str], *, timeout: float, cwd: Path,
                       env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run a block in a session of its own; whatever it left running (``cmd &``) is ended afterwards."""
    proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd, env=env,
                            start_new_session=sys.platform != "win32")
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if sys.platform != "win32":
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, kill_signal())
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return subprocess.CompletedProcess(list(argv), proc.returncode, out, err)


@dataclass
class Served:
    work: Path
    master: str
    env: dict[str, str]
    admin: str = "127.0.0.1:8080"

    def adapt(self, code: str) -> str:
        """The code as printed; when the default ports were taken, only the master's and admin's ports change."""
        return code.replace("127.0.0.1:8715", self.master).replace("127.0.0.1:8080", self.admin)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """`tubemq serve --data-dir DIR` and `tubemq topic create orders`, as the quick start says.

    On free ports: the blocks get the master's and the admin API's ports changed, nothing else, and
    ``$TUBEMQ_MASTER`` / ``$TUBEMQ_ADMIN_URL`` as the quick start's ``.env`` file sets them.
    """
    from tubemq.cli.common import start_on_free_ports

    work = tmp_path_factory.mktemp("docs")
    env = doc_env(TUBEMQ_RUNTIME_DIR=str(work / "run"))

    def spawn(ports: Sequence[int]) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-m", "tubemq", "serve", "--data-dir", str(work / "tubemq-data"),
             "--master-port", str(ports[0]), "--broker-port", str(ports[1]), "--admin-port", str(ports[2])],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=work)

    # free ports, always: with parallel test workers a default port found free can be taken before the
    # server binds it, and the blocks would then talk to someone else's server
    proc, ports = start_on_free_ports(spawn, 3, 60)
    try:
        if proc.poll() is not None:
            pytest.fail(f"tubemq serve did not start: {proc.stderr.read().decode()[-2000:] if proc.stderr else ''}")
        r = subprocess.run([sys.executable, "-m", "tubemq", "topic", "create", "orders", "--admin-url",
                            f"http://127.0.0.1:{ports[2]}/webapi.htm"], capture_output=True, timeout=60, env=env,
                           cwd=work)
        assert r.returncode == 0, r.stderr
        # a few messages, so that a consumer page finds some whichever worker and order it runs in
        import tubemq

        with tubemq.Producer(f"127.0.0.1:{ports[0]}") as producer:
            for i in range(10):
                producer.send("orders", b"order-%d" % i)
        # what a reader's shell has after the quick start's `. ./tubemq-data/tubemq-serve.env`
        env["TUBEMQ_MASTER"] = f"127.0.0.1:{ports[0]}"
        env["TUBEMQ_ADMIN_URL"] = f"http://127.0.0.1:{ports[2]}/webapi.htm"
        yield Served(work, f"127.0.0.1:{ports[0]}", env, f"127.0.0.1:{ports[2]}")
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
