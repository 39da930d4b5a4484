"""The command line without a server: help, usage errors (exit 2), a dead master (exit 1, one line)."""

from __future__ import annotations

import pytest

from tubemq.cli.common import free_port

from .helpers import run_cli


def test_help_lists_every_subcommand() -> None:
    r = run_cli(["--help"], timeout=30)
    assert r.returncode == 0
    out = r.stdout.decode()
    for cmd in ("serve", "topic", "produce", "consume", "bench", "demo"):
        assert cmd in out


@pytest.mark.parametrize(
    "args",
    [
        ["serve", "--help"],
        ["topic", "create", "--help"],
        ["topic", "list", "--help"],
        ["topic", "describe", "--help"],
        ["topic", "delete", "--help"],
        ["produce", "--help"],
        ["consume", "--help"],
        ["bench", "produce", "--help"],
        ["bench", "consume", "--help"],
        ["demo", "--help"],
    ],
)
def test_subcommand_help(args: list[str]) -> None:
    r = run_cli(args, timeout=30)
    assert r.returncode == 0, r.stderr
    assert b"usage: tubemq" in r.stdout


@pytest.mark.parametrize(
    "args",
    [
        [],  # no command
        ["frobnicate"],
        ["produce"],  # --topic missing
        ["consume", "--topic", "t"],  # --group missing
        ["consume", "--topic", "t", "--group", "g", "--from", "yesterday"],
        ["produce", "--topic", "t", "--inflight", "0", "/dev/null"],
        ["produce", "--topic", "t", "--attr", "novalue", "/dev/null"],
        ["produce", "--topic", "t", "--master", "nohostport", "/dev/null"],
        ["consume", "--topic", "t", "--group", "g", "--count", "0"],
        ["consume", "--topic", "t", "--group", "g", "--timeout", "-1"],
        ["topic", "create"],  # name missing
        ["topic", "create", "t", "--partitions", "zero"],
        ["topic", "create", "t", "--partitions", "0", "--admin-url", "http://127.0.0.1:1/webapi.htm"],
        ["bench", "produce", "--size", "0"],
        ["bench"],
        ["demo", "--events", "0"],
        ["serve"],  # --data-dir missing
    ],
)
def test_usage_errors_exit_2(args: list[str]) -> None:
    r = run_cli(args, timeout=30)
    assert r.returncode == 2, (args, r.returncode, r.stderr)
    assert b"Traceback" not in r.stderr
    assert r.stderr.strip(), "a usage error must say what is wrong"


@pytest.mark.parametrize(
    "cmd",
    [
        ["produce", "--topic", "t", "-"],
        ["consume", "--topic", "t", "--group", "g", "--count", "1"],
        ["bench", "produce", "--count", "10"],
        ["demo", "--events", "10"],
    ],
)
def test_dead_master_one_line_exit_1(cmd: list[str]) -> None:
    port = free_port()
    r = run_cli([*cmd, "--master", f"127.0.0.1:{port}"], timeout=30, input=b"hello\n")
    assert r.returncode == 1, (r.returncode, r.stderr)
    err = r.stderr.decode()
    assert "Traceback" not in err
    assert f"127.0.0.1:{port}" in err and "connection refused" in err
    assert len([line for line in err.splitlines() if line.strip()]) == 1, err


def test_dead_admin_api_exit_1() -> None:
    port = free_port()
    r = run_cli(["topic", "list", "--admin-url", f"http://127.0.0.1:{port}/webapi.htm"], timeout=30)
    assert r.returncode == 1
    err = r.stderr.decode()
    assert "Traceback" not in err and "cannot reach the admin API" in err
    r = run_cli(["topic", "create", "x1", "--master", f"127.0.0.1:{port}", "--admin-port", str(port)], timeout=30)
    assert r.returncode == 1 and b"Traceback" not in r.stderr


def test_default_master_is_announced() -> None:
    port = free_port()
    r = run_cli(["topic", "list", "--admin-port", str(port)], timeout=30)
    assert r.returncode == 1
    assert b"no --master given" in r.stderr and b"127.0.0.1:8715" in r.stderr


def test_missing_input_file_exit_1(tmp_path) -> None:  # type: ignore[no-untyped-def]
    r = run_cli(["produce", "--topic", "t", "--master", "127.0.0.1:1", str(tmp_path / "nope.txt")], timeout=30)
    assert r.returncode == 1 and b"cannot read" in r.stderr and b"Traceback" not in r.stderr
