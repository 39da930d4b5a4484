"""Runs the failover recipe of docs/guide/cluster.md as written: separate `tubemq serve` processes (two
masters, two brokers), a topic created once, produce/consume, ``kill -KILL`` of the active master, then
produce/consume again through the standby.

The block runs under bash in a temporary directory. Only two things change. The ports become free ports.
Each ``sleep`` becomes a wait, of at most SETTLE_LIMIT_S, for the state it is there for: one active
master, every broker online and synced on it, and every standby holding the active master's topics.
That way a loaded machine cannot fail the test by being slow.

Asserted: every acknowledged message is read back, no send failed, the standby lists the topic after
the takeover, and the second consume resumes where group ``g`` committed (it does not start from the
beginning). Printed: the counts, and how long each wait took.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from _support import kill_signal, needs_sigkill

from .helpers import env, free_ports

DOC = Path(__file__).resolve().parents[2] / "docs" / "guide" / "cluster.md"
MARK = "<!-- recipe: master-failover -->"
RECIPE_PORTS = ("8715", "8716", "8080", "8081", "8123", "8124")
SETTLE_LIMIT_S = 120.0
SCRIPT_LIMIT_S = 600.0
COMMAND_LIMIT_S = 180

SETTLE = textwrap.dedent(
    '''
    """Wait until one master is active, every broker is online and synced on it, and the standbys hold
    its topics (what the recipe's sleeps wait for); print the seconds waited, exit 1 after the limit."""
    import json, sys, time, urllib.request

    urls, brokers, limit = sys.argv[1].split(","), int(sys.argv[2]), float(sys.argv[3])

    def call(url, method):
        try:
            with urllib.request.urlopen(f"{url}?type=op_query&method={method}", timeout=5) as r:
                return json.loads(r.read())
        except (OSError, ValueError):
            return None

    def settled():
        status = {u: call(u, "embedded_broker_status") for u in urls}
        live = {u: s for u, s in status.items() if s}
        active = [u for u, s in live.items() if not s["masterStandby"]]
        if len(active) != 1:
            return False
        ready = [b for b in live[active[0]]["data"] if b["online"] and b["synced"]]
        if len(ready) < brokers:
            return False
        topics = {}
        for u in live:
            t = call(u, "admin_query_topic_info")
            if t is None:
                return False
            topics[u] = sorted(x["topicName"] for x in t["data"])
        return all(v == topics[active[0]] for v in topics.values())

    t0 = time.monotonic()
    while not settled():
        if time.monotonic() - t0 > limit:
            print(f"settle: not settled after {limit} s", file=sys.stderr)
            sys.exit(1)
        time.sleep(0.1)
    print(f"settle: {time.monotonic() - t0:.2f} s", file=sys.stderr)
    '''
)


def _recipe() -> str:
    text = DOC.read_text(encoding="utf-8")
    assert MARK in text, f"{DOC} lost its recipe marker {MARK}"
    block = text.split(MARK, 1)[1]
    m = re.search(r"```bash\n(.*?)```", block, re.S)
    assert m is not None, "no bash block after the recipe marker"
    return m.group(1)


def _acknowledged(output: str) -> list[tuple[int, int]]:
    """(acknowledged, failed) of each `tubemq produce` summary in the output."""
    acked = [int(x) for x in re.findall(r"^acknowledged\s+(\d+)\s*$", output, re.M)]
    failed = [int(x) for x in re.findall(r"^failed\s+(\d+)\s*$", output, re.M)]
    return list(zip(acked, failed, strict=True))


def _lines(path: Path) -> list[int]:
    return [int(x) for x in path.read_text().split()] if path.exists() else []


@pytest.mark.timeout(SCRIPT_LIMIT_S + 60)
@needs_sigkill
def test_the_cluster_guide_failover_recipe_runs(tmp_path: Path) -> None:
    recipe = _recipe()
    ports = dict(zip(RECIPE_PORTS, map(str, free_ports(len(RECIPE_PORTS))), strict=True))
    for old, new in ports.items():
        recipe = re.sub(rf"\b{old}\b", new, recipe)
    admin_urls = [f"http://127.0.0.1:{ports[p]}/webapi.htm" for p in ("8080", "8081")]
    brokers = recipe.count("--role broker")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "tubemq"
    # exec: `kill %1` hits the server itself; a client command that hangs ends after COMMAND_LIMIT_S with
    # status 124 (the log shows which), so a hang fails the test with its output instead of stalling it
    wrapper.write_text(
        f'#!/bin/sh\nif [ "$1" = serve ]; then exec "{sys.executable}" -m tubemq "$@"; fi\n'
        f'timeout {COMMAND_LIMIT_S} "{sys.executable}" -m tubemq "$@"\nrc=$?\n'
        '[ $rc -eq 0 ] || echo "tubemq $1: exit status $rc" >&2\nexit $rc\n'
    )
    wrapper.chmod(0o755)
    (tmp_path / "settle.py").write_text(SETTLE)
    work = tmp_path / "work"
    work.mkdir()
    script = tmp_path / "recipe.sh"
    script.write_text(
        f'sleep() {{ "{sys.executable}" "{tmp_path / "settle.py"}" "{",".join(admin_urls)}" {brokers} '
        f"{SETTLE_LIMIT_S} || exit 97; }}\n" + recipe
    )
    e = env(tmp_path / "run")
    e["PATH"] = f"{bin_dir}{os.pathsep}{e['PATH']}"
    log_path = tmp_path / "recipe.log"
    t0 = time.monotonic()
    with open(log_path, "wb") as log:  # a file, not a pipe: the servers inherit it
        proc = subprocess.Popen(
            ["bash", str(script)], cwd=work, env=e, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,  # the servers share its process group: killed below whatever happens
        )
        timed_out = False
        try:
            proc.wait(timeout=SCRIPT_LIMIT_S)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            try:
                os.killpg(proc.pid, kill_signal())
            except ProcessLookupError:
                pass
            proc.wait()
    output = log_path.read_text(errors="replace")
    elapsed = time.monotonic() - t0
    tail = "\n--- recipe output (last 8000 characters):\n" + output[-8000:]
    assert not timed_out, f"the recipe did not finish within {SCRIPT_LIMIT_S} s{tail}"
    assert proc.returncode != 97, f"the cluster did not settle{tail}"

    produced = _acknowledged(output)
    first, rest = _lines(work / "first.txt"), _lines(work / "rest.txt")
    repeated = set(first) & set(rest)
    print(f"\nrecipe ran in {elapsed:.1f} s; produce (acknowledged, failed): {produced}; first consume "
          f"{len(first)}, second {len(rest)}, read twice {len(repeated)}; waits: "
          f"{re.findall(r'settle: ([0-9.]+) s', output)}")
    assert produced == [(1000, 0), (1000, 0)], tail
    assert len(first) == 600, tail
    assert set(first) | set(rest) == set(range(1, 2001)), f"acknowledged messages were not read back{tail}"
    # the group resumed where it committed: at most the unconfirmed tail of the first run comes again
    assert len(repeated) < len(first), f"the second consume started from the beginning{tail}"
    assert re.search(r"^\s*2000\s*$", output, re.M), tail  # the recipe's own count line
    # `tubemq topic list` on the new active master: orders, deployed on brokers 1 and 2
    assert re.search(r"^orders\s+\d+\s+\d+\s+1,2\s", output, re.M), f"the standby lost the topic{tail}"
