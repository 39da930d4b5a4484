"""Shell recipes marked ``<!-- fresh -->`` start their own `tubemq serve` on the default ports, the way
a reader on a fresh machine runs them: verbatim, in an empty directory, one line after the other."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _support.ports import port_busy

from .blocks import Block, all_blocks
from .conftest import SERVE_PORTS, doc_env, run_in_own_session

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX shell recipes (`tubemq serve --detach`)")

FRESH = [b for b in all_blocks() if b.fresh and not b.norun]


def test_there_is_a_fresh_recipe() -> None:
    assert FRESH, "getting-started shows the shell recipe"


@pytest.mark.parametrize("block", FRESH, ids=lambda b: b.name)
def test_fresh_recipe_runs_verbatim(block: Block, tmp_path: Path) -> None:
    for attempt in range(3):  # parallel workers may take a default port between the check and the start
        r = _run_recipe(block, tmp_path / f"try{attempt}", force_free_ports=attempt > 0)
        if r.returncode != 3 or "before it was ready" not in r.stderr:
            break
    assert r.returncode == 0, r.stdout[-1000:] + r.stderr[-3000:]


def _run_recipe(block: Block, tmp_path: Path, force_free_ports: bool) -> subprocess.CompletedProcess[str]:
    tmp_path.mkdir()
    env = doc_env(TUBEMQ_RUNTIME_DIR=str(tmp_path / "run"))
    code, expect = block.code, block.expect
    taken = [p for p in SERVE_PORTS if port_busy(p)]
    if taken or force_free_ports:
        # another program holds a default port: the server gets free ones and the other commands find it
        # through $TUBEMQ_MASTER (the admin API through the endpoints `tubemq serve` publishes); nothing else
        # of the recipe changes
        from tubemq.cli.common import free_port

        ports = [free_port() for _ in SERVE_PORTS]
        print(f"default ports {taken} are taken: the recipe runs on {ports}")
        line = "tubemq serve --data-dir ./tubemq-data --detach"
        assert line in code
        code = code.replace(line, line + " --master-port {} --broker-port {} --admin-port {}".format(*ports))
        env["TUBEMQ_MASTER"] = f"127.0.0.1:{ports[0]}"
        expect = [e.replace("8715", str(ports[0])) for e in expect]
    t0 = time.monotonic()
    try:
        r = run_in_own_session(["bash", "-euo", "pipefail", "-c", code], timeout=300, cwd=tmp_path, env=env)
    finally:
        pid_file = tmp_path / "tubemq-data" / "tubemq-serve.pid"
        if pid_file.exists():  # the recipe failed before its `kill`: stop the server it started
            subprocess.run(["kill", pid_file.read_text().strip()], capture_output=True)
    print(f"{block.name}: exit {r.returncode} in {time.monotonic() - t0:.1f} s\n{r.stderr[-2000:]}")
    if r.returncode == 0:
        missing = [p for p in expect if not re.search(p, r.stdout)]
        assert not missing, f"output lacks {missing}:\n{r.stdout[-1500:]}"
    return r
