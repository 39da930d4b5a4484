"""The command line never talks to a cluster the user did not name, and its small usability fixes
(issue 14.2 and the CLI parts of 14.6): admin endpoint choice, ``-v`` anywhere, ``-X`` messages,
measured sizes in ``bench consume``, binary input refused in line mode."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from tubemq.cli import main
from tubemq.cli.admin import AdminClient

from .helpers import REPO, cli_env, run_cli


@pytest.fixture
def admin_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every admin URL the command would call (the call itself answers an empty topic list)."""
    calls: list[str] = []

    def call(self: AdminClient, op_type: str, method: str, **params: Any) -> dict[str, Any]:
        calls.append(self.url)
        return {"result": True, "errCode": 0, "errMsg": "", "data": []}

    monkeypatch.setattr(AdminClient, "call", call)
    monkeypatch.delenv("TUBEMQ_MASTER", raising=False)
    monkeypatch.delenv("TUBEMQ_ADMIN_URL", raising=False)
    return calls


def test_master_without_admin_endpoint_is_refused(admin_calls: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    # before: http://127.0.0.1:8080 was queried, whatever cluster listens there
    assert main(["topic", "list", "--master", "127.0.0.1:1"]) == 2
    assert admin_calls == []
    assert "--admin-url" in capsys.readouterr().err


def test_master_from_environment_without_admin_endpoint_is_refused(
    admin_calls: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TUBEMQ_MASTER", "10.1.2.3:8715")
    assert main(["topic", "list"]) == 2
    assert admin_calls == [] and "TUBEMQ_MASTER" in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "env", "url"), [
    (["--admin-url", "http://10.0.0.5:9090/webapi.htm"], {}, "http://10.0.0.5:9090/webapi.htm"),
    (["--master", "10.0.0.5:18715", "--admin-port", "18080"], {}, "http://10.0.0.5:18080/webapi.htm"),
    ([], {"TUBEMQ_ADMIN_URL": "http://10.0.0.6:8081/webapi.htm"}, "http://10.0.0.6:8081/webapi.htm"),
    ([], {}, "http://127.0.0.1:8080/webapi.htm"),  # nothing named: the `tubemq serve` default pair
], ids=["admin-url", "admin-port", "env", "serve-default"])
def test_admin_endpoint_is_the_named_one_and_said(
    argv: list[str], env: dict[str, str], url: str, admin_calls: list[str], monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert main(["topic", "list", *argv]) == 0
    assert admin_calls == [url]
    assert f"admin API: {url}" in capsys.readouterr().err


def test_topic_list_with_a_dead_master_lists_nothing(cluster: Any) -> None:
    """Another cluster's topics are never listed for a master that is not that cluster."""
    r = run_cli(["topic", "create", "other_cluster_topic", "--admin-url", cluster.admin_url])
    assert r.returncode == 0, r.stderr
    r = run_cli(["topic", "list", "--master", "127.0.0.1:1"], timeout=30)
    assert r.returncode == 2 and b"other_cluster_topic" not in r.stdout and b"--admin-url" in r.stderr


def test_demo_with_master_and_no_admin_endpoint_creates_nothing(cluster: Any, admin_calls: list[str],
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    from tubemq.cli.demo import _server

    args = argparse.Namespace(master=cluster.master_address, admin_url=None, admin_port=None, in_process=False,
                              keep_data=False)
    with _server(args) as target:
        target.create_topic("demo_events", 4)
    assert admin_calls == []
    assert "not created" in capsys.readouterr().err


def test_temporary_server_in_process_serves_and_cleans_up(capsys: pytest.CaptureFixture[str]) -> None:
    """``bench`` / ``demo`` without --master, with --in-process: an embedded cluster in this process that
    takes the command's topic, is named so in the summary, and leaves no directory behind."""
    import os
    import re

    from tubemq import Producer
    from tubemq.cli.common import temporary_server

    with temporary_server(in_process=True) as server:
        server.create_topic("tmp_topic", 2)
        assert server.where == f"embedded server at {server.master} (in-process)"
        with Producer(server.master) as producer:
            assert producer.send("tmp_topic", b"x").partition.topic == "tmp_topic"
        started = re.search(r"data in (\S+)\)", capsys.readouterr().err)
        assert started is not None and os.path.isdir(started.group(1))
    assert not os.path.exists(started.group(1))


def test_verbose_after_the_subcommand(tmp_path: Path) -> None:
    from tubemq.cli import build_parser

    parser = build_parser()
    for argv, level in ((["-v", "topic", "list"], 1), (["topic", "list", "-v"], 1),
                        (["-v", "produce", "-t", "x", "-vv"], 3)):
        args = parser.parse_args(argv)
        assert args.verbose + getattr(args, "verbose_after", 0) == level, argv
    # end to end: -vv after the subcommand turns on debug logging (a traceback-free INFO/DEBUG line)
    r = run_cli(["produce", "-t", "x", "-m", "127.0.0.1:1", "-vv", "-"], input=b"", timeout=30)
    assert r.returncode == 2 or r.returncode == 1
    assert b"unrecognized arguments" not in r.stderr


def test_bad_x_value_does_not_mention_a_dsn(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["produce", "-t", "x", "-m", "127.0.0.1:1", "-X", "rpc_timeout_ms=abc", "-"]) == 2
    err = capsys.readouterr().err
    assert "DSN" not in err and "-X rpc_timeout_ms='abc'" in err and "integer" in err


def test_bench_consume_reports_the_measured_size(cluster: Any, tmp_path: Path) -> None:
    """Messages of 7 bytes on a real topic: --size (default 100) is not what arrived."""
    r = run_cli(["topic", "create", "sized", "--partitions", "1", "--admin-url", cluster.admin_url])
    assert r.returncode == 0, r.stderr
    r = run_cli(["produce", "-t", "sized", "-m", cluster.master_address, "--no-progress", "-"],
                input=b"".join(b"msg-%03d\n" % i for i in range(200)), timeout=60)
    assert r.returncode == 0, r.stderr
    r = run_cli(["bench", "consume", "-m", cluster.master_address, "-t", "sized", "--count", "200", "--json",
                 "--no-progress", "--timeout", "30"], timeout=120)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["messages"] == 200 and res["size"] == 7 and res["bytes"] == 1400


@pytest.mark.parametrize("head", [b"ELF\x00\x01\n\x02", b"\xff\xfe\x00a\nb\n", b"caf\xe9\nlatin-1\n"],
                         ids=["nul", "utf16", "latin1"])
def test_binary_input_in_line_mode_is_refused(head: bytes, tmp_path: Path, cluster: Any) -> None:
    path = tmp_path / "blob.bin"
    path.write_bytes(head + bytes(range(256)) * 4)
    r = run_cli(["produce", "-t", "x", "-m", "127.0.0.1:1", str(path)], timeout=30)
    assert r.returncode == 1 and b"looks binary" in r.stderr and b"--format raw" in r.stderr, r.stderr
    assert b"cannot reach" not in r.stderr  # refused before connecting anywhere
    # stdin is checked at its first read (after connecting: an interactive stdin must not block that)
    r = run_cli(["produce", "-t", "x", "-m", cluster.master_address, "-"], input=path.read_bytes(), timeout=60)
    assert r.returncode == 1 and b"stdin looks binary" in r.stderr, r.stderr


def test_text_input_is_not_mistaken_for_binary(tmp_path: Path) -> None:
    from tubemq.cli.produce import check_text

    check_text("héllo wörld 你好\n".encode() * 10, "x")
    check_text("你好".encode()[:4], "x")  # a multi-byte character cut at the end of the checked head
    assert (REPO / "README.md").exists() and cli_env()
