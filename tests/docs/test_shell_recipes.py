"""Shell recipes marked ``<!-- fresh -->`` start their own `tubemq serve`, the way a reader on a fresh
machine runs them: verbatim, in an empty directory, the page's later blocks after them in the same shell
(tests/docs/blocks.py). Once as the machine is, and once with 8715 and 8080 held by another program
(as on a machine that already runs a TubeMQ): the quick start must not need the default ports."""

from __future__ import annotations

import contextlib
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .blocks import Block, all_blocks, blocks, pages
from .conftest import doc_env, run_in_own_session

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX shell recipes (`tubemq serve --detach`)")

#: The default master and admin ports a busy machine has taken.
HELD_PORTS = (8715, 8080)
SEPARATOR = "@@tubemq-docs-next-block@@"


def _sessions() -> list[list[Block]]:
    """Per page with a fresh recipe: that block and the runnable ones after it."""
    out = []
    for page in pages():
        found = [b for b in blocks(page) if (b.fresh or b.session) and not b.norun]
        if found:
            out.append(found)
    return out


SESSIONS = _sessions()


def _uses_spark(session: list[Block]) -> bool:
    return any("pyspark" in b.code for b in session)


def _java_missing() -> str | None:
    from _java import java_missing

    return java_missing()


#: A Spark session (the Spark guide) starts JVMs: it runs once, on the Spark tests' worker, when Java is there.
PARAMS = [pytest.param(s, id=s[0].name, marks=[pytest.mark.spark, pytest.mark.timeout(900)]) if _uses_spark(s)
          else pytest.param(s, id=s[0].name) for s in SESSIONS]


def test_there_is_a_fresh_recipe() -> None:
    assert [b for b in all_blocks() if b.fresh and not b.norun], "getting-started shows the shell recipe"
    assert any(b.lang == "python" for s in SESSIONS for b in s), "the quick start's Python runs in its shell"


@contextlib.contextmanager
def _held(ports: tuple[int, ...]) -> Iterator[None]:
    """Another program on ``ports`` (127.0.0.1): it accepts and hangs up at once, so a command that
    talks to a default port fails quickly instead of reaching a server. Skips when a port is already
    taken by something else: that machine is the busy one already, and the unheld case covers it."""
    socks: list[socket.socket] = []
    stop = threading.Event()
    try:
        for port in ports:
            s = socket.socket()
            socks.append(s)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a TIME_WAIT left by a test is no holder
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                pytest.skip(f"port {port} is already taken by another program")
            s.listen(16)
            s.settimeout(0.2)

        def hang_up(s: socket.socket) -> None:
            while not stop.is_set():
                with contextlib.suppress(OSError):
                    conn, _ = s.accept()
                    conn.close()

        threads = [threading.Thread(target=hang_up, args=(s,), daemon=True) for s in socks]
        for t in threads:
            t.start()
        yield
        stop.set()
        for t in threads:
            t.join(5)
    finally:
        stop.set()
        for s in socks:
            s.close()


def _script(session: list[Block], tmp_path: Path) -> str:
    """One shell script: the bash blocks verbatim, each python block as ``python FILE`` (same shell)."""
    parts = []
    for i, b in enumerate(session):
        if b.lang == "python":
            (tmp_path / f"block_{i}.py").write_text(b.code, encoding="utf-8")
            parts.append(f"python block_{i}.py\n")
        else:
            parts.append(b.code)
        parts.append(f"echo {SEPARATOR}\n")
    return "".join(parts)


@pytest.mark.parametrize("held", [False, True], ids=["machine-as-is", "8715-8080-taken"])
@pytest.mark.parametrize("session", PARAMS)
def test_fresh_recipe_runs_verbatim(session: list[Block], held: bool, tmp_path: Path) -> None:
    if _uses_spark(session):
        if held:
            pytest.skip("the Spark guide runs once (the quick start's sessions cover the taken ports)")
        if reason := _java_missing():
            pytest.skip(reason)
    env = doc_env(TUBEMQ_RUNTIME_DIR=str(tmp_path / "run"), SPARK_LOCAL_IP="127.0.0.1")
    script = _script(session, tmp_path)
    t0 = time.monotonic()
    with _held(HELD_PORTS) if held else contextlib.nullcontext():
        try:
            r = run_in_own_session(["bash", "-euo", "pipefail", "-c", script], timeout=840, cwd=tmp_path, env=env)
        finally:
            pid_file = tmp_path / "tubemq-data" / "tubemq-serve.pid"
            if pid_file.exists():  # the session failed before its `kill`: stop the server it started
                subprocess.run(["kill", pid_file.read_text().strip()], capture_output=True)
    print(f"{session[0].name}: exit {r.returncode} in {time.monotonic() - t0:.1f} s\n{r.stderr[-2000:]}")
    assert r.returncode == 0, r.stdout[-1500:] + r.stderr[-3000:]
    outputs = r.stdout.split(SEPARATOR + "\n")
    assert len(outputs) == len(session) + 1, r.stdout[-1500:]
    for b, out in zip(session, outputs[:-1], strict=True):
        missing = [p for p in b.expect if not re.search(p, out)]
        assert not missing, f"{b.name}: output lacks {missing}:\n{out[-1500:]}"
