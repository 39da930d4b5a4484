"""The admin client against the answers the real TubeMQ master and broker give (tests/data/admin,
written from their source), over real HTTP on 127.0.0.1: parsing, parameters and typed errors."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from _data import data_path

import tubemq.aio
from tubemq.admin import AdminClient
from tubemq.errors import AdminError, ConfigError, TubeMQConnectionError, TubeMQTimeoutError

from .conftest import SampleServer


def test_group_offsets_parse_the_real_broker_answer(sample_server: SampleServer) -> None:
    rows = AdminClient(sample_server.url).group_offsets("test_group", "test_topic")
    assert [(r.topic, r.broker_id, r.partition_id) for r in rows] == [
        ("test_topic", 1, 0), ("test_topic", 1, 1), ("test_topic", 1, 10000)
    ]
    first = rows[0]
    assert (first.offset, first.flight_offset, first.max_offset, first.lag) == (2800, 2828, 3360, 560)
    assert (first.data_offset, first.data_max, first.data_lag) == (104857, 125337, 20480)
    assert first.key == "1:test_topic:0"
    assert rows[1].offset == -2 and rows[1].lag == -2  # the broker's "undefined"
    query, _ = [r for r in sample_server.requests if r[0].get("method") == "admin_query_offset"][-1]
    assert query["method"] == "admin_query_offset" and query["groupName"] == "test_group"
    assert query["topicName"] == "test_topic" and query["brokerId"] == "1"


def test_topic_and_group_detail_samples(sample_server: SampleServer) -> None:
    admin = AdminClient(sample_server.url)
    (topic,) = admin.list_topics()
    assert topic.name == "test_topic" and topic.max_msg_size_mb == 8 and topic.total_partitions == 9
    assert topic.broker_ids == [1, 2] and topic.accept_publish is True
    assert topic.deployments[0].partition_ids == [0, 1, 2, 10000, 10001, 10002]
    assert topic.deployments[1].broker_ip == "10.0.0.12"
    detail = admin.group_detail("cap_s2_group_1795303630")
    assert detail.group == "cap_s2_group_1795303630" and detail.topics == ("cap_main",)
    assert detail.consume_type == "unbound" and detail.rebalanced is True
    assert detail.members[0].address == "127.0.0.1" and detail.members[0].over_tls is False
    with pytest.raises(AdminError, match="not found") as err:
        admin.describe_topic("other")
    assert err.value.code == 404


def test_offset_changes_send_the_real_parameters(sample_server: SampleServer) -> None:
    admin = AdminClient(sample_server.url, token="s3cret", user="ops")
    assert admin.set_offset("test_group", "test_topic", 1, 0, 1000) == 2800
    query, body = sample_server.requests[-1]
    assert query == {"type": "op_modify", "method": "admin_manual_set_current_offset"}
    assert body["manualOffset"] == "1000" and body["partitionId"] == "0" and body["modifyUser"] == "ops"
    assert body["confModAuthToken"] == "s3cret"  # in the body, never in the URL
    admin.set_offsets("test_group", {"1:test_topic:0": 5, "1:test_topic:1": 7})
    _, body = sample_server.requests[-1]
    assert body["manualSet"] == "true" and json.loads(body["offsetJsonInfo"]) == {"1:test_topic:0": 5, "1:test_topic:1": 7}
    detail = admin.partition_offset("test_group", "test_topic", 1, 0, real_offset=True)
    assert (detail.tmp_offset, detail.max_offset, detail.zk_offset) == (2828, 3360, 2800)
    assert "s3cret" not in repr(admin)
    assert all("s3cret" not in json.dumps(q) for q, _ in sample_server.requests)


def test_refusals_are_typed(sample_server: SampleServer) -> None:
    admin = AdminClient(sample_server.url)
    sample_server.overrides["admin_manual_set_current_offset"] = json.loads(
        data_path("admin", "broker_admin_manual_set_current_offset_fail.json").read_text()
    )
    with pytest.raises(AdminError, match="bigger than Current MaxOffset") as err:
        admin.set_offset("g", "test_topic", 1, 0, 99999)
    assert err.value.code == 400 and err.value.method == "admin_manual_set_current_offset"
    with pytest.raises(AdminError, match="has not been registered"):  # the one broker lacks the source
        admin.clone_offsets("other_group", "g2")
    sample_server.overrides["admin_query_broker_run_status"] = sample_server.run_status([1, 2])
    with pytest.raises(AdminError, match="no time lookup"):  # a real broker has no admin_query_offset_by_time
        admin.offsets_for_times("test_topic", 0)
    with pytest.raises(ConfigError, match="brokerId:topicName:partitionId"):
        admin.set_offsets("g", {"test_topic:0": 1})


def test_booked_groups_and_broker_urls_override(sample_server: SampleServer) -> None:
    sample_server.overrides["admin_query_broker_run_status"] = sample_server.run_status([1, 7])
    admin = AdminClient(sample_server.url, broker_urls={7: sample_server.url.replace("/webapi.htm", "/broker.htm")})
    assert admin.list_groups() == ["old_group", "test_group", "test_group2"]
    paths = [q.get("brokerId") for q, _ in sample_server.requests if q.get("method") == "admin_get_booked_groupname"]
    assert paths == ["1", "7"]


def test_unreachable_and_bad_url() -> None:
    with pytest.raises(TubeMQConnectionError, match="cannot reach"):
        AdminClient("127.0.0.1:1", timeout=5).list_topics()
    with pytest.raises(ConfigError):
        AdminClient("ftp://x")
    with pytest.raises(ConfigError):
        AdminClient("127.0.0.1:1", timeout=0)


def test_asyncio_client_same_answers(sample_server: SampleServer) -> None:
    async def main() -> None:
        async with tubemq.aio.AdminClient(sample_server.url, token="t") as admin:
            rows = await admin.group_offsets("test_group")
            assert [r.partition_id for r in rows] == [0, 1, 10000]
            assert await admin.set_offset("test_group", "test_topic", 1, 0, 10) == 2800
            (topic,) = await admin.list_topics()
            assert topic.total_partitions == 9
            with pytest.raises(AdminError, match="has not been registered"):
                await admin.clone_offsets("other_group", "g2")
        with pytest.raises(TubeMQConnectionError):
            await tubemq.aio.AdminClient("127.0.0.1:1", timeout=5).list_topics()

    asyncio.run(main())


def test_master_address_of_a_local_server_resolves(monkeypatch: pytest.MonkeyPatch) -> None:
    from tubemq import _endpoints as endpoints

    published = endpoints.Endpoints("127.0.0.1:18715", "http://127.0.0.1:18080/webapi.htm", [], 1, "/tmp/x")
    monkeypatch.setattr(endpoints, "lookup", lambda address: published if address == "127.0.0.1:18715" else None)
    assert AdminClient("127.0.0.1:9,127.0.0.1:18715").url == "http://127.0.0.1:18080/webapi.htm"
    assert AdminClient("10.0.0.1:8080").url == "http://10.0.0.1:8080/webapi.htm"  # not local: taken as the web port


def test_rpc_port_is_named_in_the_error(cluster: object) -> None:
    with pytest.raises((TubeMQConnectionError, TubeMQTimeoutError), match="web port"):
        AdminClient("http://" + cluster.master_address, timeout=2).list_topics()  # type: ignore[attr-defined]


def test_unknown_broker_is_an_admin_error(sample_server: SampleServer) -> None:
    admin = AdminClient(sample_server.url)
    with pytest.raises(AdminError, match="broker\\(s\\) 9 not known") as err:
        admin.set_offset("g", "test_topic", 9, 0, 0)
    assert err.value.code == 404
    with pytest.raises(AdminError, match="9 not known"):
        admin.set_offsets("g", {"1:test_topic:0": 0, "9:test_topic:0": 0})


def test_topic_update_reports_per_broker_failures(sample_server: SampleServer) -> None:
    admin = AdminClient(sample_server.url)
    with pytest.raises(AdminError, match="2:test_topic: \\[400\\] Parameter numPartitions") as err:
        admin.update_topic("test_topic", partitions=2, accept_publish=False)
    assert err.value.code == 400 and err.value.method == "admin_modify_topic_info"
    query, body = sample_server.requests[-1]
    assert query["method"] == "admin_modify_topic_info"
    assert body["brokerId"] == "1,2" and body["numPartitions"] == "2" and body["acceptPublish"] == "false"
    assert "acceptSubscribe" not in body
    with pytest.raises(ConfigError, match="nothing to change"):
        admin.update_topic("test_topic")


def test_a_dripping_server_cannot_hold_the_caller() -> None:
    """An answer sent a few bytes at a time ends in TubeMQTimeoutError at the call's timeout."""
    import socket
    import threading

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 50000000\r\n\r\n")
                while not stop.is_set():
                    try:
                        conn.sendall(b"x" * 300_000)
                    except OSError:
                        break
                    stop.wait(0.2)

    threading.Thread(target=serve, daemon=True).start()
    url = f"http://127.0.0.1:{srv.getsockname()[1]}"
    try:
        started = time.monotonic()
        with pytest.raises(TubeMQTimeoutError):
            AdminClient(url, timeout=1.0).list_topics()
        print(f"sync client gave up after {time.monotonic() - started:.1f}s")

        async def main() -> None:
            with pytest.raises(TubeMQTimeoutError):
                await tubemq.aio.AdminClient(url, timeout=1.0).list_topics()

        asyncio.run(main())
    finally:
        stop.set()
        srv.close()
