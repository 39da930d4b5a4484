"""The pytest plugin as a user meets it: a test file of theirs that asks for ``tubemq_cluster`` /
``tubemq_master``, run by pytest in a separate process that finds the plugin through its entry point."""

from __future__ import annotations

import importlib.metadata
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

USER_TESTS = '''
import time
import pytest
import tubemq


def _consume(master, group, topic, n):
    got = []
    with tubemq.Consumer(master, group=group, topics=[topic], consume_from="earliest") as c:
        deadline = time.monotonic() + 60
        while len(got) < n and time.monotonic() < deadline:
            batch = c.poll(0.5)
            if batch:
                got.extend(m.data for m in batch)
                c.confirm(batch)
    return got


def test_round_trip(tubemq_cluster, tubemq_master):
    assert tubemq_master == tubemq_cluster.master_address
    assert tubemq_master.startswith("127.0.0.1:")
    tubemq_cluster.create_topic("demo", partitions=1)
    with tubemq.Producer(tubemq_master) as p:
        for i in range(3):
            p.send("demo", b"m%d" % i)
    assert sorted(_consume(tubemq_master, "g1", "demo", 3)) == [b"m0", b"m1", b"m2"]
    with open("addresses.txt", "a") as f:
        f.write(tubemq_master + " " + tubemq_cluster.broker_address + "\\n")


@pytest.mark.tubemq_cluster(brokers=2, topics={"orders": 4, "audit": 1})
def test_marker_options(tubemq_cluster):
    assert len(tubemq_cluster.broker_addresses) == 2
    assert {t.name: t for t in tubemq_cluster.topics()}.keys() >= {"orders", "audit"}
    with open("addresses.txt", "a") as f:
        f.write(tubemq_cluster.master_address + " " + " ".join(tubemq_cluster.broker_addresses) + "\\n")


def test_each_test_gets_its_own_cluster(tubemq_cluster):
    assert tubemq_cluster.topics() == [] or all(t.name not in ("demo", "orders") for t in tubemq_cluster.topics())
'''


def _refused(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError:
        return True
    return False


def test_the_entry_point_names_the_plugin() -> None:
    eps = [e for e in importlib.metadata.entry_points(group="pytest11") if e.name == "tubemq"]
    assert [e.value for e in eps] == ["tubemq.pytest_plugin"], "reinstall tubemq: its pytest11 entry point is missing"


def test_user_tests_get_a_running_cluster_torn_down_after(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_user=USER_TESTS)
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", timeout=300)
    result.assert_outcomes(passed=3)
    lines = (pytester.path / "addresses.txt").read_text().split("\n")
    addresses = [a for line in lines for a in line.split()]
    assert len(addresses) == 5  # 2 from the round trip, 3 from the two-broker cluster
    assert len(set(addresses)) == 5, addresses  # ephemeral ports: no two clusters share one
    assert all(_refused(a) for a in addresses), "a cluster kept listening after its test"
    assert not list(pytester.path.glob("tubemq-data*")), "data written outside the tmp folder"


def test_bad_marker_arguments_are_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_bad='''
import pytest

@pytest.mark.tubemq_cluster(topics={"t": 0})
def test_zero_partitions(tubemq_cluster):
    pass

@pytest.mark.tubemq_cluster(no_such_option=1)
def test_unknown_option(tubemq_cluster):
    pass
''')
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", timeout=120)
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["*partition counts >= 1*", "*no_such_option*"])


def test_the_plugin_can_be_disabled(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_off="def test_x(tubemq_cluster):\n    pass\n")
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", "-p", "no:tubemq", timeout=120)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*fixture 'tubemq_cluster' not found*"])


def test_loading_the_plugin_imports_nothing_heavy(tmp_path: Path) -> None:
    """Every pytest run in an environment with tubemq installed loads the plugin: it must stay cheap."""
    code = ("import sys, tubemq.pytest_plugin\n"
            "heavy = [m for m in ('tubemq.server', 'tubemq.producer', 'tubemq.consumer', 'google.protobuf', "
            "'asyncio') if m in sys.modules]\n"
            "print(heavy)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]", r.stdout
