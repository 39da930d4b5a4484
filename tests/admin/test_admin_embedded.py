"""The admin client against the embedded server over real TCP/HTTP on 127.0.0.1: topics, brokers,
groups, offsets (query, set, reset to earliest / latest / offset / time, clone), sync and asyncio,
and a consumer that really reads from where a reset put its group."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from _support.produce import send_around_a_split

import tubemq
import tubemq.aio
from tubemq.admin import AdminClient
from tubemq.errors import AdminError, AdminRecordError
from tubemq.server import EmbeddedCluster
from tubemq.server.testing import FAST_CLIENT_TIMERS as FAST_TIMERS


def _consume(cluster: Any, group: str, topic: str, want: int, deadline_s: float = 60.0) -> list[bytes]:
    """Messages read by a fresh consumer of ``group`` until ``want`` arrived or the deadline passed."""
    out: list[bytes] = []
    with tubemq.Consumer(cluster.master_address, group=group, topics=[topic], consume_from="earliest") as c:
        end = time.monotonic() + deadline_s
        while len(out) < want and time.monotonic() < end:
            batch = c.poll(timeout=1.0)
            if batch is None:
                continue
            out.extend(m.data for m in batch.messages)
            c.confirm(batch)
    return out


@pytest.fixture
def loaded(tmp_path: Path) -> Any:
    """A cluster with topic ``tp`` (2 partitions): 10 messages ``a*``, a split time, 10 messages ``b*``,
    all read and committed by group ``g1``."""
    with EmbeddedCluster(data_dir=tmp_path / "data", **FAST_TIMERS) as cluster:
        cluster.create_topic("tp", partitions=2)
        with tubemq.Producer(cluster.master_address) as p:
            split = send_around_a_split(p, "tp", [b"a%d" % i for i in range(10)], [b"b%d" % i for i in range(10)])
        got = _consume(cluster, "g1", "tp", 20)
        assert len(got) == 20
        yield cluster, split


def test_topics_and_brokers(cluster: Any) -> None:
    admin = AdminClient(cluster.admin_url)
    admin.create_topic("adm_t", partitions=4, stores=2)
    info = admin.describe_topic("adm_t")
    assert info.total_partitions == 8 and info.broker_ids == [1]
    assert info.deployments[0].partition_ids == [0, 1, 2, 3, 10000, 10001, 10002, 10003]
    assert "adm_t" in [t.name for t in admin.list_topics()]
    admin.update_topic("adm_t", max_msg_size_mb=2)
    assert admin.describe_topic("adm_t").max_msg_size_mb == 2
    with pytest.raises(AdminRecordError, match=r"1:adm_t: \[402\] Existed record found") as exists:
        admin.create_topic("adm_t")
    assert exists.value.code == 402 and exists.value.applied == []
    with pytest.raises(AdminRecordError, match=r"1:adm_t: \[406\] The values of acceptPublish and acceptSubscribe"):
        admin.delete_topic("adm_t")  # a real master's rule: publish and subscribe off first
    assert admin.describe_topic("adm_t").name == "adm_t"
    admin.delete_topic("adm_t", stop_first=True)
    with pytest.raises(AdminError, match="not found"):
        admin.describe_topic("adm_t")
    (broker,) = admin.brokers()
    assert broker.broker_id == 1 and broker.online is True and broker.manage_status == "online"
    assert broker.web_url is not None  # the embedded server answers the broker web API on its admin port


def test_group_offsets_and_resets(loaded: Any) -> None:
    cluster, split = loaded
    admin = AdminClient(cluster.admin_url)
    assert admin.list_groups() == ["g1"]
    rows = admin.group_offsets("g1")
    assert {(r.topic, r.partition_id) for r in rows} == {("tp", 0), ("tp", 1)}
    assert all(r.offset == r.max_offset and r.lag == 0 for r in rows)
    # offsets_for_times: the first entry at/after the split is the 11th of the store (28-byte entries)
    found = admin.offsets_for_times("tp", split)
    assert [(t.partition_id, t.offset) for t in found] == [(0, 280), (1, 280)]
    assert [t.offset for t in admin.offsets_for_times("tp", 0)] == [0, 0]
    assert [t.offset for t in admin.offsets_for_times("tp", split + 3_600_000)] == [560, 560]
    after = admin.reset_offsets_to_time("g1", "tp", split)
    assert [r.offset for r in after] == [280, 280]
    assert sorted(_consume(cluster, "g1", "tp", 10)) == sorted(b"b%d" % i for i in range(10))
    assert [r.offset for r in admin.reset_offsets("g1", "tp", "earliest")] == [0, 0]
    assert [r.offset for r in admin.reset_offsets("g1", "tp", 28 * 5)] == [140, 140]
    assert [r.offset for r in admin.reset_offsets("g1", "tp", "latest")] == [560, 560]
    assert admin.set_offset("g1", "tp", 1, 0, 28) == 560
    detail = admin.partition_offset("g1", "tp", 1, 0, real_offset=True)
    assert (detail.tmp_offset, detail.min_offset, detail.max_offset, detail.zk_offset) == (28, 0, 560, 28)
    with pytest.raises(AdminError, match="bigger than Current MaxOffset"):
        admin.set_offset("g1", "tp", 1, 0, 10_000)
    assert admin.clone_offsets("g1", "g2,g3") == 1
    assert [r.offset for r in admin.group_offsets("g3", "tp")] == [28, 560]
    with pytest.raises(AdminError, match="has not been registered"):
        admin.clone_offsets("nobody", "g4")
    with pytest.raises(AdminError, match="no offset history"):  # g1 was never online while recorded
        admin.set_offsets_by_time("g1", split)


def test_asyncio_client(loaded: Any) -> None:
    cluster, split = loaded

    async def main() -> None:
        async with tubemq.aio.AdminClient(cluster.admin_url) as admin:
            assert [t.name for t in await admin.list_topics()] == ["tp"]
            rows = await admin.reset_offsets_to_time("g1", "tp", split)
            assert [r.offset for r in rows] == [280, 280]
            assert [t.offset for t in await admin.offsets_for_times("tp", split)] == [280, 280]
            with pytest.raises(AdminError, match="group g1 is not known to the master") as err:
                await admin.group_detail("g1")  # its consumers closed: the master has no member of it
            assert err.value.code == 404

    asyncio.run(main())


def test_modify_calls_need_the_token(tmp_path: Path) -> None:
    with EmbeddedCluster(data_dir=tmp_path / "d", admin_token="tok", **FAST_TIMERS) as cluster:
        cluster.create_topic("tp", partitions=1)
        with pytest.raises(AdminError, match="confModAuthToken is missing") as err:
            AdminClient(cluster.admin_url).set_offsets("g", {"1:tp:0": 0})
        assert "tok" not in str(err.value)
        AdminClient(cluster.admin_url, token="tok").set_offsets("g", {"1:tp:0": 0})
        assert AdminClient(cluster.admin_url).offsets_for_times("tp", 0)[0].offset == 0  # a query: no token


def test_several_brokers_in_one_process(tmp_path: Path) -> None:
    with EmbeddedCluster(data_dir=tmp_path / "d", brokers=2, **FAST_TIMERS) as cluster:
        cluster.create_topic("tp", partitions=1)
        admin = AdminClient(cluster.admin_url)
        assert sorted(b.broker_id for b in admin.brokers()) == sorted(admin.describe_topic("tp").broker_ids)
        found = admin.offsets_for_times("tp", 0)
        assert len(found) == 2 and len({t.broker_id for t in found}) == 2
        admin.set_offsets("g", {t.key: 0 for t in found})
        assert len(admin.group_offsets("g")) == 2


def test_consumer_offsets_for_times(loaded: Any) -> None:
    cluster, split = loaded
    with tubemq.Consumer(cluster.master_address, group="g9", topics=["tp"]) as c:
        found = c.offsets_for_times("tp", split, admin_url=cluster.admin_url)
    assert [(t.partition_id, t.offset) for t in found] == [(0, 280), (1, 280)]

    async def main() -> list[Any]:
        async with tubemq.aio.Consumer(cluster.master_address, group="g9", topics=["tp"]) as c:
            return await c.offsets_for_times("tp", split, admin_url=cluster.admin_url)

    assert [t.offset for t in asyncio.run(main())] == [280, 280]


def test_set_offsets_by_time_restores_the_recorded_offsets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tubemq.server.admin import offset_history

    monkeypatch.setattr(offset_history, "HISTORY_INTERVAL_MS", 100)
    with EmbeddedCluster(data_dir=tmp_path / "d", **FAST_TIMERS) as cluster:
        cluster.create_topic("tp", partitions=1)
        with tubemq.Producer(cluster.master_address) as p:
            for i in range(6):
                p.send("tp", b"m%d" % i)
        admin = AdminClient(cluster.admin_url)
        with tubemq.Consumer(cluster.master_address, group="gh", topics=["tp"], consume_from="earliest") as c:
            got = 0
            end = time.monotonic() + 60
            while got < 6 and time.monotonic() < end:
                batch = c.poll(timeout=1.0)
                if batch is not None:
                    got += len(batch.messages)
                    c.confirm(batch)
            assert got == 6
            # records of the confirmed state: from the next whole second on (recordTime has seconds)
            second = int(time.time()) + 1
            time.sleep(second - time.time() + 0.5)
        assert [r.offset for r in admin.reset_offsets("gh", "tp", "earliest")] == [0]
        rows = admin.set_offsets_by_time("gh", second * 1000)
        assert [(r["brokerId"], r["topicName"], r["partitionId"], r["offset"]) for r in rows] == [(1, "tp", 0, 6 * 28)]
        assert rows[0]["recordTime"] >= second * 1000
        assert [r.offset for r in admin.group_offsets("gh")] == [6 * 28]
        with pytest.raises(AdminError, match="no offset history"):
            admin.set_offsets_by_time("gh", (second + 3600) * 1000)
        admin.reset_offsets("gh", "tp", "earliest")
        from tubemq.cli import main

        assert main(["group", "reset", "gh", "--topic", "tp", "--to-history", str(second * 1000),
                     "--admin-url", cluster.admin_url]) == 0
        assert [r.offset for r in admin.group_offsets("gh")] == [6 * 28]


def test_lag_in_messages_where_known_and_index_units_always(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A partition alone in its store: lag in messages (index bytes / 28). Sharing a store: the index
    lag counts the siblings' entries too, so no message count is made up from it."""
    from tubemq.cli import main

    with EmbeddedCluster(data_dir=tmp_path / "d", **FAST_TIMERS) as cluster:
        cluster.create_topic("alone", partitions=1, stores=2)
        cluster.create_topic("shared", partitions=2)
        with tubemq.Producer(cluster.master_address) as p:
            for i in range(12):
                p.send("alone", b"a%d" % i)
                p.send("shared", b"s%d" % i)
        admin = AdminClient(cluster.admin_url)
        for topic in ("alone", "shared"):
            admin.reset_offsets("glag", topic, "earliest")
        rows = {(r.topic, r.partition_id): r for r in admin.group_offsets("glag")}
        alone = [r for (t, _), r in rows.items() if t == "alone"]
        shared = [r for (t, _), r in rows.items() if t == "shared"]
        assert sum(r.lag_messages or 0 for r in alone) == 12 and all(r.lag == 28 * r.lag_messages for r in alone)
        assert all(r.lag_messages is None and r.lag == r.lag_index_bytes for r in shared)
        assert sum(r.lag for r in shared) == 2 * 12 * 28  # each partition's index lag holds both partitions' entries
        assert main(["group", "offsets", "glag", "--admin-url", cluster.admin_url]) == 0
        out = capsys.readouterr().out
        assert "LAG_MSGS" in out and "LAG_INDEX_BYTES" in out
