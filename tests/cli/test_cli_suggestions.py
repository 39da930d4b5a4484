"""What a newcomer's slips get: a misspelt command or option names the likely one, Ctrl-C during
`tubemq consume` exits 130 as the CLI reference says."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

import tubemq
from tubemq.errors import ConfigError

from .helpers import cli_env, interrupt, needs_posix_signals, run_cli


def test_action_typo_prints_the_group_usage_and_the_likely_action() -> None:
    r = run_cli(["topic", "creat", "orders"], timeout=30)
    err = r.stderr.decode()
    assert r.returncode == 2, err
    assert err.startswith("usage: tubemq topic "), err
    assert "did you mean 'create'?" in err


def test_command_typo_prints_the_likely_command_usage() -> None:
    r = run_cli(["topc", "list"], timeout=30)
    err = r.stderr.decode()
    assert r.returncode == 2, err
    assert err.startswith("usage: tubemq topic "), err
    assert "did you mean 'topic'?" in err


def test_unrelated_word_gets_the_top_level_usage_and_no_guess() -> None:
    r = run_cli(["frobnicate"], timeout=30)
    err = r.stderr.decode()
    assert r.returncode == 2 and err.startswith("usage: tubemq [-h]"), err
    assert "did you mean" not in err


@pytest.mark.parametrize("make", [
    lambda: tubemq.Producer("127.0.0.1:1", rpc_timout_ms=3000),
    lambda: tubemq.Consumer("127.0.0.1:1", group="g", topics=["t"], prefetch_batch=2),
])
def test_option_typo_names_the_closest_option(make: object) -> None:
    with pytest.raises(ConfigError) as info:
        make()  # type: ignore[operator]
    assert "did you mean" in str(info.value), info.value
    assert ("'rpc_timeout_ms'" in str(info.value)) or ("'prefetch_batches'" in str(info.value))


def test_dsn_typo_and_object_option_say_what_to_do() -> None:
    from tubemq.config import ProducerConfig

    with pytest.raises(ConfigError, match="did you mean 'rpc_timeout_ms'"):
        ProducerConfig.from_dsn("tubemq://127.0.0.1:8715?rpc_timout_ms=5")
    with pytest.raises(ConfigError, match="keyword argument") as info:
        ProducerConfig.from_dsn("tubemq://127.0.0.1:8715?partitioner=x")
    assert "DSN" not in str(info.value)


def test_empty_topics_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="at least one topic") as info:
        tubemq.Consumer("127.0.0.1:1", group="g", topics=[])
    assert info.value.field == "topics"


@needs_posix_signals
def test_consume_ctrl_c_exits_130_after_its_summary(cluster: object) -> None:
    master = cluster.master_address  # type: ignore[attr-defined]
    cluster.create_topic("ctrl_c", partitions=1)  # type: ignore[attr-defined]
    with tubemq.Producer(master) as producer:
        producer.send("ctrl_c", b"one")
    proc = subprocess.Popen([sys.executable, "-m", "tubemq", "consume", "--topic", "ctrl_c", "--group", "g",
                             "--master", master, "--from", "earliest"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env())
    watchdog = threading.Timer(120, proc.kill)  # a consume that never prints must not hang the test
    watchdog.start()
    try:
        assert proc.stdout is not None
        t0 = time.monotonic()
        line = proc.stdout.readline()  # the message: the consumer is assigned and consuming
        assert line == b"one\n", line
        interrupt(proc)
        _, err = proc.communicate(timeout=60)
        print(f"consume stopped {time.monotonic() - t0:.1f} s after start")
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)
    text = err.decode(errors="replace")
    assert proc.returncode == 130, text
    assert "Traceback" not in text and "committed" in text
