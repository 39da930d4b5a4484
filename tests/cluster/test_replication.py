"""The master pair's rules inside one process (server/replication.py), with fast timers. The standby
copies topics, brokers and term. It refuses admin changes and names the active master. Two active
masters resolve by term, then by address. A broker given one master learns the standby from it. The
sync call needs the admin token and refuses bad standby URLs. Process kills are in
test_master_failover.py."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from _support import wait_for

from tubemq.errors import ConfigError
from tubemq.server import EmbeddedCluster, ServerConfig

from .helpers import admin_call, env, free_ports

FAST = {"takeover_after_ms": 500, "balance_period_ms": 200,
        "broker_heartbeat_period_ms": 100, "broker_heartbeat_timeout_ms": 1500}
LIMIT_S = 30.0


def _wait(pred: Any, what: str, timeout: float = LIMIT_S) -> None:
    wait_for(pred, timeout, what)


def _status(c: EmbeddedCluster) -> dict[str, Any]:
    return admin_call(c.admin_url, "embedded_broker_status")


def _standby(c: EmbeddedCluster) -> bool:
    return bool(_status(c)["masterStandby"])


def _modify(c: EmbeddedCluster, method: str, **params: Any) -> dict[str, Any]:
    return admin_call(c.admin_url, method, type="op_modify", **params)


@contextmanager
def _pair(tmp: Path, **extra: Any) -> Iterator[tuple[EmbeddedCluster, EmbeddedCluster]]:
    """Master A (active) and master B, each with the other as peer; B joins A as its standby."""
    pa, aa, pb, ab = free_ports(4)
    url = "http://127.0.0.1:{}/webapi.htm".format
    opts = {**FAST, **extra, "role": "master"}
    a = EmbeddedCluster(tmp / "a", master_port=pa, admin_port=aa, peer_master=f"127.0.0.1:{pb}",
                        master_admin_url=url(ab), **opts)
    b = EmbeddedCluster(tmp / "b", master_port=pb, admin_port=ab, peer_master=f"127.0.0.1:{pa}",
                        master_admin_url=url(aa), **opts)
    with a:
        assert not _standby(a)  # its peer is not running: it starts active
        with b:
            assert _standby(b)  # its peer is active: it joins as standby
            yield a, b


def _active_and_standby() -> tuple[dict[str, Any], dict[str, Any]]:
    """Options of an active master A and of a standby B watching it, on free ports."""
    pa, aa, pb, ab = free_ports(4)
    a = dict(master_port=pa, admin_port=aa, role="master", **FAST)
    b = dict(master_port=pb, admin_port=ab, role="master", standby=True, peer_master=f"127.0.0.1:{pa}",
             master_admin_url=f"http://127.0.0.1:{aa}/webapi.htm", **FAST)
    return a, b


@contextmanager
def _standby_with_copy(tmp: Path, topic: str) -> Iterator[tuple[EmbeddedCluster, EmbeddedCluster, dict[str, Any]]]:
    """Active master A holding ``topic`` and standby B once it copied it; B's options come along for restarts."""
    a_opts, b_opts = _active_and_standby()
    with EmbeddedCluster(tmp / "a", **a_opts) as a:
        a.create_topic(topic)
        with EmbeddedCluster(tmp / "b", **b_opts) as b:
            _wait(lambda: [t.name for t in b.topics()] == [topic], "the standby to copy the topic")
            yield a, b, b_opts


def test_standby_copies_topics_and_refuses_changes(tmp_path: Path) -> None:
    with _pair(tmp_path) as (a, b):
        a.create_topic("alpha", partitions=2)
        _wait(lambda: [t.name for t in b.topics()] == ["alpha"], "the standby to copy alpha")
        assert b.topics()[0].num_partitions == 2
        r = _modify(b, "admin_add_new_topic_record", topicName="beta")
        assert not r["result"] and r["errCode"] == 302 and a.admin_url in r["errMsg"], r
        assert r["activeMaster"] == a.admin_url
        a.delete_topic("alpha")
        _wait(lambda: b.topics() == [], "the standby to drop alpha")
        assert _modify(a, "admin_add_broker_configure", brokerIp="10.0.0.5", brokerId=55)["result"]
        _wait(lambda: [r["brokerId"] for r in admin_call(b.admin_url, "admin_query_broker_configure")["data"]]
              == [55], "the standby to copy the broker configure record")
        assert _status(b)["masterTerm"] == 0


def test_a_new_topic_is_pushed_to_the_standby(tmp_path: Path) -> None:
    """The active master pokes its standby on every topic change: with a 60 s replication period the
    standby still has a new topic long before the period ends."""
    with _pair(tmp_path, broker_heartbeat_period_ms=60000, broker_heartbeat_timeout_ms=120000) as (a, b):
        _wait(lambda: b.admin_url in a._call(lambda: list(a.server.replication.standbys)), "B known to A")
        t0 = time.monotonic()
        a.create_topic("pushed")
        _wait(lambda: [t.name for t in b.topics()] == ["pushed"], "the poke to bring the topic", timeout=30)
        print(f"\nnew topic on the standby {time.monotonic() - t0:.3f} s after its creation (period 60 s)")


def test_two_active_masters_resolve_by_term_then_address(tmp_path: Path) -> None:
    with _pair(tmp_path) as (a, b):
        b.set_standby(False)  # a split: both active with the same term
        _wait(lambda: _standby(a) != _standby(b), "one of two active masters to step down")
        loser, winner = (a, b) if _standby(a) else (b, a)
        assert winner.master_address < loser.master_address  # same term: the lower host:port stays
        winner.create_topic("after_split")
        _wait(lambda: [t.name for t in loser.topics()] == ["after_split"], "the loser to copy the winner")
        # a higher term wins whatever the address
        loser._call(loser.server.meta.set_term, 5)
        loser.set_standby(False)
        _wait(lambda: _standby(winner) and not _standby(loser), "the master of the higher term to win")
        _wait(lambda: _status(winner)["masterTerm"] == 5, "the term to replicate")


def test_takeover_raises_the_term_and_survives_a_restart(tmp_path: Path) -> None:
    with _standby_with_copy(tmp_path, "kept") as (a, b, b_opts):
        a.stop()
        _wait(lambda: not _standby(b), "the standby to take over")
        assert _status(b)["masterTerm"] == 1
    # the replica and the term were saved in b's own data directory
    with EmbeddedCluster(tmp_path / "b", **{**b_opts, "standby": False, "peer_master": None,
                                             "master_admin_url": None}) as b2:
        assert [t.name for t in b2.topics()] == ["kept"]
        assert _status(b2)["masterTerm"] == 1


def test_the_old_master_restarted_without_a_peer_yields_to_the_new_one(tmp_path: Path) -> None:
    """The old active master comes back with its first command line (no peer): the master that took
    over outranks it (higher term), so it steps down, copies the newer topics and stands by."""
    pa, aa, pb, ab = free_ports(4)
    a_opts = dict(master_port=pa, admin_port=aa, role="master", **FAST)
    b = EmbeddedCluster(tmp_path / "b", master_port=pb, admin_port=ab, role="master", standby=True,
                        peer_master=f"127.0.0.1:{pa}", master_admin_url=f"http://127.0.0.1:{aa}/webapi.htm", **FAST)
    with EmbeddedCluster(tmp_path / "a", **a_opts) as a:
        a.create_topic("old")
        with b:
            _wait(lambda: [t.name for t in b.topics()] == ["old"], "the standby to copy the topic")
            a.stop()
            _wait(lambda: not _standby(b), "the standby to take over")
            b.create_topic("new")
            with EmbeddedCluster(tmp_path / "a", **a_opts) as a2:  # term 0 on disk, no peer configured
                _wait(lambda: _standby(a2), "the stale master to step down")
                _wait(lambda: [t.name for t in a2.topics()] == ["new", "old"], "it to copy the newer topics")
                assert not _standby(b)
                b.stop()
                _wait(lambda: not _standby(a2), "it to take over from the peer it learned")
                assert _status(a2)["masterTerm"] == 2


def test_a_broker_given_one_master_reports_to_its_standby_too(tmp_path: Path) -> None:
    with _pair(tmp_path) as (a, b):
        with EmbeddedCluster(tmp_path / "broker", role="broker", master_admin_url=a.admin_url, broker_id=7,
                             **FAST):
            _wait(lambda: any(x["brokerId"] == 7 and x["online"] for x in _status(b)["data"]),
                  "the broker to report to the standby it was not given")
            a.create_topic("on_seven", broker_ids=[7])
            _wait(lambda: [t.name for t in b.topics()] == ["on_seven"], "the standby to copy the topic")


def test_sync_call_needs_the_token_and_a_sane_url(tmp_path: Path) -> None:
    with EmbeddedCluster(tmp_path, role="master", admin_token="s3cret", **FAST) as a:
        r = _modify(a, "embedded_master_sync")
        assert not r["result"] and "confModAuthToken is missing" in r["errMsg"], r  # the real master's words
        r = _modify(a, "embedded_master_sync", confModAuthToken="s3cret", callerAdminUrl="ftp://x")
        assert not r["result"] and "callerAdminUrl" in r["errMsg"], r
        a.create_topic("t1")
        r = _modify(a, "embedded_master_sync", confModAuthToken="s3cret",
                    callerAdminUrl="http://127.0.0.1:1/webapi.htm")
        assert r["result"] and not r["standby"] and [t["name"] for t in r["topics"]] == ["t1"], r


def test_a_pair_needs_role_master(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as exc:
        ServerConfig(data_dir=tmp_path, peer_master="127.0.0.1:8715")  # role "all": brokers in the process
    assert exc.value.field == "peer_master"
    with pytest.raises(ConfigError) as exc:
        ServerConfig(data_dir=tmp_path, role="master", peer_master="127.0.0.1:8715", master_admin_url="8080")
    assert exc.value.field == "master_admin_url"
    r = subprocess.run(
        [sys.executable, "-m", "tubemq", "serve", "--data-dir", str(tmp_path), "--peer-master", "127.0.0.1:1"],
        capture_output=True, text=True, timeout=60, env=env(tmp_path / "run"),
    )
    assert r.returncode == 2 and "peer_master" in r.stderr, r.stderr


def test_an_unchanged_topic_set_is_not_sent_again(tmp_path: Path) -> None:
    with EmbeddedCluster(tmp_path, role="master", **FAST) as a:
        a.create_topic("t1")
        first = _modify(a, "embedded_master_sync")
        assert [t["name"] for t in first["topics"]] == ["t1"]
        again = _modify(a, "embedded_master_sync", knownTopics=first["topicsVersion"])
        assert "topics" not in again and again["topicsVersion"] == first["topicsVersion"]
        a.create_topic("t2")
        changed = _modify(a, "embedded_master_sync", knownTopics=first["topicsVersion"])
        assert [t["name"] for t in changed["topics"]] == ["t1", "t2"]


def test_a_master_that_never_answers_does_not_delay_the_others(tmp_path: Path) -> None:
    """A broker given a master that accepts connections but never answers (each call waits out its 5 s
    timeout) keeps heartbeating the live master on time: it never goes offline there."""
    opts = {**FAST, "broker_heartbeat_timeout_ms": 3000}
    with socket.socket() as silent, EmbeddedCluster(tmp_path / "m", role="master", **opts) as m:
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)  # never accepted, never answered
        dead = f"http://127.0.0.1:{silent.getsockname()[1]}/webapi.htm"
        with EmbeddedCluster(tmp_path / "b", role="broker", master_admin_url=f"{dead},{m.admin_url}", broker_id=3,
                             **opts):
            _wait(lambda: any(b["brokerId"] == 3 and b["online"] for b in _status(m)["data"]), "the broker")
            offline = 0
            t_end = time.monotonic() + 8.0  # longer than a silent call's timeout
            while time.monotonic() < t_end:
                offline += not all(b["online"] for b in _status(m)["data"])
                time.sleep(0.1)
            assert offline == 0, "the silent master delayed the heartbeats to the live one"


def test_a_standby_that_never_held_a_copy_does_not_take_over(tmp_path: Path) -> None:
    """Its empty topic set would make every broker drop its data: it waits for an active master."""
    nobody, nobody_admin = free_ports(2)
    with EmbeddedCluster(tmp_path, role="master", standby=True, peer_master=f"127.0.0.1:{nobody}",
                         master_admin_url=f"http://127.0.0.1:{nobody_admin}/webapi.htm", **FAST) as b:
        t_end = time.monotonic() + 3.0  # six takeover delays
        while time.monotonic() < t_end:
            assert _standby(b)
            time.sleep(0.1)


def test_a_broker_keeps_its_term_and_ignores_a_stale_master(tmp_path: Path) -> None:
    """A restarted broker does not take the topic set of a master of an older term while one of its own
    term may still answer; after STALE_TERM_PERIODS without one (the masters were set up anew) it does."""
    from tubemq.server.config import ServerConfig
    from tubemq.server.meta import BrokerEntry, MetaStore
    from tubemq.server.registration import STALE_TERM_PERIODS, BrokerRegistrar

    def registrar() -> BrokerRegistrar:
        entry = BrokerEntry(1, "127.0.0.1", 1)
        cfg = ServerConfig(tmp_path, role="broker", master_admin_url="http://127.0.0.1:1/webapi.htm",
                           broker_heartbeat_period_ms=1000)
        return BrokerRegistrar(cfg, lambda: entry, MetaStore(tmp_path))

    r = registrar()
    assert r._take_term("new", 1) and r.term == 1
    r = registrar()  # restarted: the term comes from its meta.json
    assert r.term == 1
    assert not r._take_term("stale", 0)
    assert r._take_term("new", 1)
    r._term_seen -= STALE_TERM_PERIODS * r.period_s + 1  # no master of term 1 answered for that long
    assert r._take_term("fresh cluster", 0) and r.term == 0


def test_a_standby_restarted_after_its_peer_died_does_not_take_over(tmp_path: Path) -> None:
    """Its saved copy may lack topics created while it was down: it waits (and says so) instead."""
    with _standby_with_copy(tmp_path, "seen") as (_a, _b, b_opts):
        pass  # B stops with its copy, then A dies
    with EmbeddedCluster(tmp_path / "b", **b_opts) as b:
        t_end = time.monotonic() + 3.0  # six takeover delays
        while time.monotonic() < t_end:
            assert _standby(b)
            time.sleep(0.1)
    with EmbeddedCluster(tmp_path / "b", **{**b_opts, "standby": False}) as b:  # the operator accepts its copy
        assert not _standby(b) and [t.name for t in b.topics()] == ["seen"]


def test_a_topic_the_new_master_missed_is_kept_and_adopted(tmp_path: Path) -> None:
    """The previous active master created ``late`` just before it died, before its standby copied it.
    The brokers keep ``late`` and its data when the new term's master does not list it, report it, and
    the new master deploys it again. A deletion within one term still drops it."""
    from tubemq.server.config import ServerConfig
    from tubemq.server.meta import BrokerEntry, MetaStore, TopicConf
    from tubemq.server.registration import BrokerRegistrar, BrokerTable

    entry = BrokerEntry(1, "127.0.0.1", 1)
    cfg = ServerConfig(tmp_path / "broker", role="broker", master_admin_url="http://a,http://b")
    broker = BrokerRegistrar(cfg, lambda: entry, MetaStore(tmp_path / "broker"))
    early, late = TopicConf("early").to_json(), TopicConf("late", num_partitions=5).to_json()

    def answer(term: int, *topics: dict[str, Any]) -> dict[str, Any]:
        return {"result": True, "standby": False, "term": term, "metaVersion": 1, "data": list(topics)}

    def names() -> list[str]:
        return [t.name for t in broker.meta.topics()]

    broker.apply("http://a", answer(0, early, late))
    broker.apply("http://b", answer(1, early))  # the new active master's copy lacks "late"
    assert names() == ["early", "late"] and list(broker.held) == ["late"]
    params = broker._params("http://b")
    new_master = MetaStore(tmp_path / "master")
    new_master.create_topic("early")
    standby_table = BrokerTable(new_master, lambda e: None, lambda: True, lambda b: True)
    standby_table.heartbeat(params)
    assert new_master.get("late") is None  # a standby adopts nothing
    table = BrokerTable(new_master, lambda e: None, lambda: False, lambda b: True)
    table.heartbeat(params)
    adopted = new_master.get("late")
    assert adopted is not None and adopted.num_partitions == 5
    broker.apply("http://b", answer(1, early, adopted.to_json()))
    assert not broker.held and "heldTopics" not in broker._params("http://b")
    broker.apply("http://b", answer(1, early))  # deleted by the master of this term: dropped
    assert names() == ["early"]
