"""Every admin method against the answers a real TubeMQ 2.5 master and brokers gave (tests/data/admin/real),
replayed over real HTTP on 127.0.0.1 the way Jetty sent them: successes, whole-call errors, per-record
failures inside ``result: true`` answers, and an unreachable broker web API."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator

import pytest

import tubemq.aio
from tubemq.admin import AdminClient
from tubemq.cli import main
from tubemq.errors import AdminError, AdminRecordError, ConfigError

from .replay import RealCluster, body, real_cluster


@pytest.fixture
def real() -> Iterator[RealCluster]:
    with real_cluster() as cluster:
        yield cluster


def _admin(real: RealCluster, **kw: object) -> AdminClient:
    return AdminClient(real.master.url, token="tok", broker_urls=real.broker_urls, **kw)  # type: ignore[arg-type]


# ---- item: a user name a real master accepts


def test_default_users_follow_the_real_rule(real: RealCluster) -> None:
    from tubemq.cli.admin import AdminClient as CliAdmin

    real.master.answer("admin_add_new_topic_record", "add_new_topic_record: success, 2 brokers x 2 partitions")
    rows = _admin(real).create_topic("admr_t2", partitions=2, broker_ids=[1, 2])
    assert [(r["brokerId"], r["success"]) for r in rows] == [(1, True), (2, True)]
    (sent,) = real.master.calls("admin_add_new_topic_record")
    assert sent["createUser"] == "tubemq_admin" and sent["brokerId"] == "1,2" and sent["confModAuthToken"] == "tok"
    assert CliAdmin(real.master.url).user == "tubemq_cli"


@pytest.mark.parametrize("user", ["tubemq-admin", "1ops", "_ops", "", "ops.x", "opé", "ops "])
def test_a_user_a_real_master_refuses_is_a_config_error(user: str) -> None:
    with pytest.raises(ConfigError, match="letter") as err:
        AdminClient("127.0.0.1:1", user=user)
    assert err.value.field == "user"


def test_the_refusal_text_is_the_real_one(real: RealCluster) -> None:
    """What a hyphenated user got from the real master (the client no longer sends one)."""
    real.master.answer("admin_add_new_topic_record", "add_new_topic_record: hyphenated createUser")
    with pytest.raises(AdminError, match="illegal value for createUser, value must begin with a letter") as err:
        _admin(real).call("op_modify", "admin_add_new_topic_record", topicName="t", createUser="a-b")
    assert err.value.code == 400


def test_cli_user_option(real: RealCluster, capsys: pytest.CaptureFixture[str]) -> None:
    real.master.answer("admin_add_new_topic_record", "add_new_topic_record: success, 1 broker (delete-flow")
    assert main(["topic", "create", "admr_tdel", "--admin-url", real.master.url, "--user", "ops_1"]) == 0
    assert real.master.calls("admin_add_new_topic_record")[-1]["createUser"] == "ops_1"
    assert main(["topic", "create", "admr_tdel", "--admin-url", real.master.url, "--user", "ops-1"]) == 2
    assert "--user" in capsys.readouterr().err
    assert len(real.master.calls("admin_add_new_topic_record")) == 1  # refused before any call


# ---- item: per-record failures inside result:true answers


def test_create_of_an_existing_topic_raises_402(real: RealCluster) -> None:
    real.master.answer("admin_add_new_topic_record", "add_new_topic_record: topic already exists")
    with pytest.raises(AdminRecordError, match=r"1:admr_t2: \[402\] Existed record found") as err:
        _admin(real).create_topic("admr_t2", broker_ids="1,2")
    assert err.value.code == 402 and [r["brokerId"] for r in err.value.failed] == [1, 2] and not err.value.applied


def test_mixed_rows_name_what_was_applied(real: RealCluster) -> None:
    real.master.answer("admin_add_new_topic_record", "add_new_topic_record: exists on broker 1, new on broker 2")
    with pytest.raises(AdminRecordError, match=r"applied on 2:admr_tdel") as err:
        _admin(real).create_topic("admr_tdel", broker_ids=[1, 2])
    assert [r["brokerId"] for r in err.value.failed] == [1]


def test_create_on_an_unknown_broker_raises_401(real: RealCluster) -> None:
    real.master.answer("admin_add_new_topic_record", "add_new_topic_record: unknown brokerId 99")
    with pytest.raises(AdminRecordError, match="99:adm_tx: .401. Not found broker configure") as err:
        _admin(real).create_topic("adm_tx", broker_ids=[99])
    assert err.value.code == 401


@pytest.mark.parametrize("case, pattern", [
    ("add_new_topic_record: bad topic name (hyphen)", "illegal value for topicName"),
    ("add_new_topic_record: topic name too long", "over max length for topicName"),
    ("add_new_topic_record: negative numPartitions", "numPartitions value must >= 1"),
    ("add_new_topic_record: missing brokerId", "Parameter brokerId is missing"),
    ("add_new_topic_record: bad createDate format", "parse error"),
])
def test_create_whole_call_errors(real: RealCluster, case: str, pattern: str) -> None:
    real.master.answer("admin_add_new_topic_record", case)
    with pytest.raises(AdminError, match=pattern) as err:
        _admin(real).create_topic("x")
    assert err.value.code == 400 and not isinstance(err.value, AdminRecordError)


def _topic_query(real: RealCluster, case: str) -> None:
    real.master.answer("admin_query_topic_info", case)


def test_delete_covers_every_broker_of_the_topic(real: RealCluster) -> None:
    _topic_query(real, "query_topic_info: after grow + max size change")  # admr_tmod on brokers 1 and 2
    real.master.answer("admin_delete_topic_info", "delete_topic_info: topic still accepts publish/subscribe")
    with pytest.raises(AdminRecordError, match=r"1:admr_tmod: \[406\].*2:admr_tmod: \[406\]") as err:
        _admin(real).delete_topic("admr_tmod")
    assert err.value.code == 406
    assert real.master.calls("admin_delete_topic_info")[-1]["brokerId"] == "1,2"


def test_delete_stop_first_then_purge(real: RealCluster) -> None:
    _topic_query(real, "query_topic_info: after grow + max size change")
    real.master.answer("admin_modify_topic_info", "modify_topic_info: acceptPublish=false (publish flag off)")
    real.master.answer("admin_delete_topic_info", "delete_topic_info: success (flags off)")
    real.master.answer("admin_remove_topic_info", "remove_topic_info: after redo")
    rows = _admin(real).delete_topic("admr_tmod", stop_first=True, purge=True)
    assert all(r["success"] for r in rows)
    (flags,) = real.master.calls("admin_modify_topic_info")
    assert (flags["acceptPublish"], flags["acceptSubscribe"], flags["brokerId"]) == ("false", "false", "1,2")
    assert [len(real.master.calls(m)) for m in ("admin_delete_topic_info", "admin_remove_topic_info")] == [1, 1]


def test_delete_of_a_gone_topic_raises_401(real: RealCluster) -> None:
    real.master.answer("admin_delete_topic_info", "delete_topic_info: unknown topic")
    with pytest.raises(AdminRecordError, match=r"1:adm_nosuch: \[401\] Not found the topic") as err:
        _admin(real).delete_topic("adm_nosuch", broker_ids="1")
    assert err.value.code == 401
    _topic_query(real, "query_topic_info: unknown topic")
    with pytest.raises(AdminError) as gone:  # default brokers: the master does not know the topic at all
        _admin(real).delete_topic("adm_nosuch")
    assert gone.value.code == 404


def test_purge_of_a_never_deleted_topic_raises_406(real: RealCluster) -> None:
    real.master.answer("admin_delete_topic_info", "delete_topic_info: success (flags off)")
    real.master.answer("admin_remove_topic_info", "remove_topic_info: flags off but never soft-deleted")
    with pytest.raises(AdminRecordError, match=r"Please softly deleted the brokerId-topicName\(1:adm_tx_ctl\)"):
        _admin(real).delete_topic("adm_tx_ctl", broker_ids="1", purge=True)


def test_cli_create_existing_and_delete_refused_exit_non_zero(
    real: RealCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    url = real.master.url
    real.master.answer("admin_add_new_topic_record", "add_new_topic_record: topic already exists")
    assert main(["topic", "create", "admr_t2", "--broker-id", "1,2", "--admin-url", url]) == 1
    err = capsys.readouterr().err
    assert "1:admr_t2: [402] Existed record found" in err and "created topic" not in err
    _topic_query(real, "query_topic_info: after grow + max size change")
    real.master.answer("admin_delete_topic_info", "delete_topic_info: topic still accepts publish/subscribe")
    assert main(["topic", "delete", "admr_tmod", "--admin-url", url]) == 1
    err = capsys.readouterr().err
    assert "[406]" in err and "--stop-first" in err and "deleted topic" not in err
    real.master.answer("admin_delete_topic_info", "delete_topic_info: unknown topic")
    assert main(["topic", "delete", "adm_nosuch", "--broker-id", "1", "--admin-url", url]) == 1
    assert "[401]" in capsys.readouterr().err


def test_modify_rows(real: RealCluster) -> None:
    admin = _admin(real)
    real.master.answer("admin_modify_topic_info", "modify_topic_info: shrink numPartitions 3 -> 1")
    with pytest.raises(AdminRecordError, match="Partition number less than before, new value is 1") as err:
        admin.update_topic("admr_tmod", partitions=1, broker_ids=[1, 2])
    assert err.value.code == 407
    real.master.answer("admin_modify_topic_info", "modify_topic_info: grow numPartitions 1 -> 3")
    assert len(admin.update_topic("admr_tmod", partitions=3, broker_ids=[1, 2])) == 2
    real.master.answer("admin_modify_topic_info", "modify_topic_info: nothing to change")
    rows = admin.update_topic("admr_tmod", accept_publish=True, broker_ids=[1, 2])  # 403 rows: already so
    assert {r["errCode"] for r in rows} == {403}
    real.master.answer("admin_modify_topic_info", "modify_topic_info: unknown topic")
    with pytest.raises(AdminRecordError, match=r"1:adm_nosuch: \[401\]"):
        admin.update_topic("adm_nosuch", accept_publish=False, broker_ids=[1])
    real.master.answer("admin_modify_topic_info", "modify_topic_info: negative numPartitions")
    with pytest.raises(AdminError, match="must >= 1"):
        admin.update_topic("admr_tmod", partitions=5, broker_ids=[1])


def test_topic_control_rows(real: RealCluster) -> None:
    admin = _admin(real)
    real.master.answer("admin_update_topic_control_info", "update_topic_control_info: maxMsgSizeInMB 1 -> 3")
    assert admin.update_topic("adm_tx_ctl", max_msg_size_mb=3)[0]["success"] is True
    real.master.answer("admin_update_topic_control_info", "update_topic_control_info: value unchanged")
    assert admin.update_topic("admr_tmod", max_msg_size_mb=2)[0]["errCode"] == 403
    real.master.answer("admin_update_topic_control_info", "update_topic_control_info: maxMsgSizeInMB 2048")
    with pytest.raises(AdminError, match="must <= 20"):
        admin.update_topic("admr_tmod", max_msg_size_mb=2048)


def test_topic_queries(real: RealCluster) -> None:
    admin = _admin(real)
    _topic_query(real, "query_topic_info: after grow + max size change")
    info = admin.describe_topic("admr_tmod")
    assert info.broker_ids == [1, 2] and info.max_msg_size_mb == 2
    assert [d.num_partitions for d in info.deployments] == [3, 3]
    _topic_query(real, "query_topic_info: soft-deleted topic")
    assert {d.status_id for d in admin.describe_topic("admr_tdel").deployments} == {1}
    _topic_query(real, "query_topic_info: unknown topic")
    assert admin.list_topics("adm_nosuch") == []
    with pytest.raises(AdminError) as err:
        admin.describe_topic("adm_nosuch")
    assert err.value.code == 404
    _topic_query(real, "query_topic_info: bad topic name (hyphen) in query")
    with pytest.raises(AdminError, match="illegal value for topicName"):
        admin.list_topics("a-b")
    _topic_query(real, "query_topic_info: two topics (csv)")
    assert len(admin.list_topics(["admr_t2", "admr_tmod"])) == 2


# ---- brokers


def test_broker_queries_and_changes(real: RealCluster) -> None:
    admin = _admin(real)
    real.master.answer("admin_query_broker_run_status", "query_broker_run_status: all brokers")
    brokers = admin.brokers()
    assert [(b.broker_id, b.online, b.web_port) for b in brokers] == [(1, True, 8081), (2, True, 8082)]
    assert brokers[1].broker_ip == "127.0.0.2" and brokers[0].run_status == "running"
    real.master.answer("admin_query_broker_run_status", "query_broker_run_status: draft broker 3")
    (draft,) = admin.brokers([3])
    assert draft.manage_status == "draft" and draft.online is None
    real.master.answer("admin_add_broker_configure", "add_broker_configure: success")
    assert admin.add_broker("127.0.0.3", broker_id=3)[0]["brokerId"] == 3
    real.master.answer("admin_add_broker_configure", "add_broker_configure: duplicate brokerId")
    with pytest.raises(AdminError, match="Duplicated broker configure record") as dup:
        admin.add_broker("127.0.0.3", broker_id=3)
    assert not isinstance(dup.value, AdminRecordError)
    real.master.answer("admin_reload_broker_configure", "reload_broker_configure: draft broker")
    with pytest.raises(AdminRecordError, match=r"broker 3: \[406\]"):
        admin.reload_brokers("3")
    real.master.answer("admin_offline_broker_configure", "offline_broker_configure: draft broker")
    with pytest.raises(AdminRecordError, match=r"broker 3: \[407\]"):
        admin.offline_brokers([3])
    real.master.answer("admin_online_broker_configure", "online_broker_configure: success (broker 3)")
    assert admin.online_brokers([3])[0]["success"] is True
    real.master.answer("admin_online_broker_configure", "online_broker_configure: 3 and unknown 99")
    with pytest.raises(AdminRecordError, match=r"broker 3: \[403\].*broker 99: \[401\]"):
        admin.online_brokers("3,99")
    real.master.answer("admin_delete_broker_configure", "delete_broker_configure: broker still online")
    with pytest.raises(AdminRecordError, match=r"\[406\]"):
        admin.delete_brokers([3])
    real.master.answer("admin_offline_broker_configure", "offline_broker_configure: success (broker 3)")
    assert admin.offline_brokers([3])[0]["success"] is True
    real.master.answer("admin_delete_broker_configure", "delete_broker_configure: offline but has topic deploy")
    with pytest.raises(AdminRecordError, match=r"\[404\]"):
        admin.delete_brokers([3])
    real.master.answer("admin_delete_broker_configure", "delete_broker_configure: isReservedData=true after")
    assert admin.delete_brokers([3])[0]["success"] is True
    sent = real.master.calls("admin_delete_broker_configure")[-1]
    assert sent["isReservedData"] == "true" and sent["modifyUser"] == "tubemq_admin"
    with pytest.raises(ConfigError):
        admin.delete_brokers([])


def test_cli_broker_offline_and_delete(real: RealCluster, capsys: pytest.CaptureFixture[str]) -> None:
    real.master.answer("admin_offline_broker_configure", "offline_broker_configure: success (broker 3)")
    assert main(["broker", "offline", "3", "--admin-url", real.master.url]) == 0
    real.master.answer("admin_delete_broker_configure", "delete_broker_configure: broker still online")
    assert main(["broker", "delete", "3", "--admin-url", real.master.url]) == 1
    assert "please offline first" in capsys.readouterr().err.lower()


# ---- groups


def test_group_detail(real: RealCluster) -> None:
    admin = _admin(real)
    real.master.answer("admin_query_consume_group_detail", "query_consume_group_detail: live group")
    detail = admin.group_detail("admr_g1")
    assert detail.topics == ("admr_t2",) and len(detail.members) == 2
    assert {p.broker_id for m in detail.members for p in m.partitions} == {1, 2}
    real.master.answer("admin_query_consume_group_detail", "query_consume_group_detail: unknown group")
    with pytest.raises(AdminError, match="adm_nosuch_g") as err:
        admin.group_detail("adm_nosuch_g")
    assert err.value.code == 404
    real.master.answer("admin_query_consume_group_detail", "query_consume_group_detail: missing consumeGroup")
    with pytest.raises(AdminError, match="consumeGroup is missing"):
        admin.group_detail(" ")


def test_list_groups(real: RealCluster) -> None:
    real.brokers[1].answer("admin_get_booked_groupname", "get_booked_groupname: broker 1 (SDK")
    real.brokers[2].answer("admin_get_booked_groupname", "get_booked_groupname: broker 2 (SDK")
    groups = _admin(real).list_groups()
    one = set(body("get_booked_groupname: broker 1 (SDK")["dataSet"][0]["groupName"])
    two = set(body("get_booked_groupname: broker 2 (SDK")["dataSet"][0]["groupName"])
    assert groups == sorted(one | two) and "admr_g1" in groups


def test_the_recorded_answers_are_all_json_without_content_type(real: RealCluster) -> None:
    """The transport reads a body that ends with the connection, as Jetty sends it (sync and asyncio)."""
    async def main_() -> None:
        admin = tubemq.aio.AdminClient(real.master.url, broker_urls=real.broker_urls)
        assert [b.broker_id for b in await admin.brokers()] == [1, 2]

    asyncio.run(main_())


def test_no_warning_when_all_brokers_answer(real: RealCluster, caplog: pytest.LogCaptureFixture) -> None:
    real.brokers[1].answer("admin_get_booked_groupname", "get_booked_groupname: broker 1 (SDK")
    real.brokers[2].answer("admin_get_booked_groupname", "get_booked_groupname: broker 2 (SDK")
    with caplog.at_level(logging.WARNING, logger="tubemq.admin"):
        _admin(real).list_groups()
    assert not caplog.records


# ---- a broker whose web API does not answer is skipped and reported


def test_list_groups_skips_a_dead_broker(real: RealCluster, caplog: pytest.LogCaptureFixture) -> None:
    real.brokers[1].answer("admin_get_booked_groupname", "get_booked_groupname: broker 1 (SDK")
    real.kill(2)
    with caplog.at_level(logging.WARNING, logger="tubemq.admin"):
        groups = _admin(real, timeout=5).list_groups()
    assert groups == sorted(set(body("get_booked_groupname: broker 1 (SDK")["dataSet"][0]["groupName"]))
    assert len(groups) > 0 and list(groups.unreachable) == [2]
    assert any("broker 2 skipped" in r.getMessage() for r in caplog.records)


def test_reset_with_a_dead_broker_resets_the_others_and_says_so(
    real: RealCluster, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    real.master.answer("admin_query_topic_info", "query_topic_info: fresh 2-broker topic")  # admr_t2 on 1 and 2
    real.brokers[1].answer("admin_set_offset", "set_offset: SDK reset_offsets(to='earliest'), broker 1")
    real.brokers[1].answer("admin_query_offset", "query_offset: after reset to earliest, broker 1")
    real.kill(2)
    with caplog.at_level(logging.WARNING, logger="tubemq.admin"):
        rows = _admin(real, timeout=5).reset_offsets("admr_g1", "admr_t2", "earliest")
    assert rows and {r.broker_id for r in rows} == {1} and list(rows.unreachable) == [2]
    assert all(r.offset == 0 for r in rows)
    assert len(real.brokers[1].calls("admin_set_offset")) == 1
    code = main(["group", "reset", "admr_g1", "-t", "admr_t2", "--to-earliest", "--admin-url", real.master.url])
    assert code == 1 and "broker 2 skipped" in capsys.readouterr().err


def test_group_offsets_and_clone_skip_a_dead_broker(real: RealCluster) -> None:
    real.brokers[1].answer("admin_query_offset", "query_offset: live group, broker 1")
    real.brokers[1].answer("admin_clone_offset", "clone_offset: success admr_g1 -> admr_g2, broker 1")
    real.kill(2)
    admin = _admin(real, timeout=5)
    rows = admin.group_offsets("admr_g1", "admr_t2")
    assert {r.broker_id for r in rows} == {1} and list(rows.unreachable) == [2]
    assert admin.clone_offsets("admr_g1", "admr_g2", "admr_t2") == 1


def test_a_dead_broker_named_explicitly_is_an_error(real: RealCluster) -> None:
    from tubemq.errors import TubeMQConnectionError

    real.kill(2)
    with pytest.raises(TubeMQConnectionError):
        _admin(real, timeout=5).set_offset("admr_g1", "admr_t2", 2, 1, 0)


# ---- group offsets on the brokers


def test_group_offsets_parse_both_brokers(real: RealCluster) -> None:
    real.brokers[1].answer("admin_query_offset", "query_offset: group with committed offsets + lag, broker 1")
    real.brokers[2].answer("admin_query_offset", "query_offset: group with committed offsets + lag, broker 2")
    rows = _admin(real).group_offsets("admr_g1", "admr_t2")
    assert {(r.broker_id, r.partition_id) for r in rows} == {(1, 0), (1, 1), (2, 0), (2, 1)}
    assert not rows.unreachable
    for r in rows:
        assert r.lag == r.max_offset - r.offset and r.offset % 28 == 0
    sent = real.brokers[1].calls("admin_query_offset")[-1]
    assert sent["groupName"] == "admr_g1" and sent["topicName"] == "admr_t2"
    real.brokers[1].answer("admin_query_offset", "query_offset: unknown group")
    real.brokers[2].answer("admin_query_offset", "query_offset: unknown topic")
    assert _admin(real).group_offsets("adm_nosuch_g") == []


def test_partition_offset(real: RealCluster) -> None:
    admin = _admin(real)
    real.brokers[1].answer("admin_query_group_offset", "query_group_offset: partition 0 requireRealOffset=true")
    d = admin.partition_offset("admr_g1", "admr_t2", 1, 0, real_offset=True)
    assert (d.min_offset, d.max_offset, d.zk_offset) == (0, 1316, 588)
    assert real.brokers[1].calls("admin_query_group_offset")[-1]["requireRealOffset"] == "true"
    real.brokers[1].answer("admin_query_group_offset", "query_group_offset: partition 0 requireRealOffset=false")
    assert admin.partition_offset("admr_g1", "admr_t2", 1, 0).zk_offset is None
    for case, text in (("query_group_offset: unknown partition 7", "not found the store by topicName"),
                       ("query_group_offset: unknown topic", "not found the topicName configure")):
        real.brokers[1].answer("admin_query_group_offset", case)
        with pytest.raises(AdminError, match=text):
            admin.partition_offset("admr_g1", "admr_t2", 1, 7)
    with pytest.raises(AdminError, match="broker.*9.*not known"):
        admin.partition_offset("admr_g1", "admr_t2", 9, 0)


def test_set_offset(real: RealCluster) -> None:
    admin = _admin(real)
    real.brokers[1].answer("admin_manual_set_current_offset", "manual_set_current_offset: success (partition 0 -> 1)")
    assert admin.set_offset("admr_g1", "admr_t2", 1, 0, 28) == 588
    sent = real.brokers[1].calls("admin_manual_set_current_offset")[-1]
    assert (sent["manualOffset"], sent["modifyUser"], sent["partitionId"]) == ("28", "tubemq_admin", "0")
    for case, text in (
        ("manual_set_current_offset: offset above max", r"manualOffset bigger than Current MaxOffset"),
        ("manual_set_current_offset: negative offset", r"lower than Current MinOffset:\(-5<0\)"),
        ("manual_set_current_offset: unknown topic", "not found the topicName configure"),
        ("manual_set_current_offset: hyphenated modifyUser", "illegal value for modifyUser"),
    ):
        real.brokers[1].answer("admin_manual_set_current_offset", case)
        with pytest.raises(AdminError, match=text) as err:
            admin.set_offset("admr_g1", "admr_t2", 1, 0, -5)
        assert err.value.code == 400


def test_set_offsets_and_resets(real: RealCluster) -> None:
    admin = _admin(real)
    real.brokers[1].answer("admin_set_offset", "set_offset: manualSet success (SDK set_offsets)")
    assert admin.set_offsets("admr_g1", {"1:admr_t2:0": 0, "1:admr_t2:1": 56}) == [1]
    sent = real.brokers[1].calls("admin_set_offset")[-1]
    assert sent["manualSet"] == "true" and sent["offsetJsonInfo"] == '{"1:admr_t2:0": 0, "1:admr_t2:1": 56}'
    assert not real.brokers[2].calls("admin_set_offset")  # only the brokers named in the keys
    real.brokers[1].answer("admin_set_offset", "set_offset: keys of another broker only")
    with pytest.raises(AdminError, match="offsetJsonInfo's value is invalid"):
        admin.set_offsets("admr_g1", {"1:admr_t2:0": 0})
    with pytest.raises(ConfigError, match="brokerId:topicName:partitionId"):
        admin.set_offsets("admr_g1", {"admr_t2:0": 0})
    real.master.answer("admin_query_topic_info", "query_topic_info: fresh 2-broker topic")
    real.brokers[1].answer("admin_set_offset", "set_offset: SDK reset_offsets(to='latest'), broker 1")
    real.brokers[2].answer("admin_set_offset", "set_offset: SDK reset_offsets(to='latest'), broker 2")
    real.brokers[1].answer("admin_query_offset", "query_offset: after reset to latest, broker 1")
    real.brokers[2].answer("admin_query_offset", "query_offset: after reset to earliest, broker 2")
    rows = admin.reset_offsets("admr_g1", "admr_t2", "latest")
    assert {r.broker_id for r in rows} == {1, 2}
    latest = real.brokers[1].calls("admin_set_offset")[-1]["offsetJsonInfo"]
    assert str(1 << 62) in latest  # "latest": the broker clamps into [min, max]


def test_clone_offsets(real: RealCluster) -> None:
    admin = _admin(real)
    real.brokers[1].answer("admin_clone_offset", "clone_offset: success admr_g1 -> admr_g2, broker 1")
    real.brokers[2].answer("admin_clone_offset", "clone_offset: success admr_g1 -> admr_g2, broker 2")
    assert admin.clone_offsets("admr_g1", "admr_g2", "admr_t2") == 2
    assert real.brokers[2].calls("admin_clone_offset")[-1]["targetGroupName"] == "admr_g2"
    real.brokers[2].answer("admin_clone_offset", "clone_offset: unknown source group")
    assert admin.clone_offsets("admr_g1", "admr_g2") == 1  # the source is not on broker 2: tolerated
    real.brokers[1].answer("admin_clone_offset", "clone_offset: unknown source group, no topicName")
    with pytest.raises(AdminError, match="has no offsets on broker"):
        admin.clone_offsets("adm_nosuch_g", "admr_g2")
    real.brokers[1].answer("admin_clone_offset", "clone_offset: unknown topic")
    with pytest.raises(AdminError, match="unsubscribed to the specified topic set"):
        admin.clone_offsets("admr_g1", "admr_g2", "adm_nosuch")


# ---- replay by history on TubeMQ 2.5: the history query, then the manual set


def test_set_offsets_by_time_reads_history_and_sets_it(real: RealCluster) -> None:
    for bid in (1, 2):
        real.brokers[bid].answer("admin_get_group_history_offset", f"get_group_history_offset: broker {bid}")
        real.brokers[bid].answer("admin_set_offset", f"set_offset: SDK reset_offsets(to='earliest'), broker {bid}")
    rows = _admin(real).set_offsets_by_time("admr_g1", "20261202023411", "admr_t2")
    assert sorted((r["brokerId"], r["partitionId"], r["offset"]) for r in rows) == [
        (1, 0, 1148), (1, 1, 1148), (2, 0, 0), (2, 1, 0)]
    assert {r["recordTime"] for r in rows if r["brokerId"] == 1} == {1796178898571}
    asked = real.brokers[1].calls("admin_get_group_history_offset")[-1]
    assert (asked["groupName"], asked["recordTime"], asked["msgCount"]) == ("admr_g1", "20261202023411", "1")
    sent = real.brokers[1].calls("admin_set_offset")[-1]
    assert sent["manualSet"] == "true" and sent["offsetJsonInfo"] == '{"1:admr_t2:0": 1148, "1:admr_t2:1": 1148}'
    # the broker's own by-time call (always failing on 2.5) is never used
    assert not real.brokers[1].calls("admin_set_offset_by_time")


def test_set_offsets_by_time_without_history_is_an_error(real: RealCluster) -> None:
    for bid in (1, 2):
        real.brokers[bid].answer("admin_get_group_history_offset", "get_group_history_offset: unknown group")
    with pytest.raises(AdminError, match="no offset history") as err:
        _admin(real).set_offsets_by_time("adm_nosuch_g", "20261202023411")
    assert err.value.code == 400
    assert not real.brokers[1].calls("admin_set_offset")
    real.brokers[1].answer("admin_get_group_history_offset", "get_group_history_offset: missing recordTime")
    with pytest.raises(AdminError, match="recordTime is missing"):
        _admin(real).set_offsets_by_time("admr_g1", "20261202023411")


def test_cli_to_history_on_real_brokers(real: RealCluster, capsys: pytest.CaptureFixture[str]) -> None:
    for bid in (1, 2):
        real.brokers[bid].answer("admin_get_group_history_offset", f"get_group_history_offset: broker {bid}")
        real.brokers[bid].answer("admin_set_offset", f"set_offset: SDK reset_offsets(to='earliest'), broker {bid}")
    code = main(["group", "reset", "admr_g1", "-t", "admr_t2", "--to-history", "2026-12-02T02:34:11",
                 "--admin-url", real.master.url])
    out = capsys.readouterr().out
    assert code == 0 and "admr_t2" in out and "1148" in out


def test_offsets_for_times_on_a_real_broker_says_what_works(real: RealCluster) -> None:
    real.master.answer("admin_query_topic_info", "query_topic_info: fresh 2-broker topic")
    real.brokers[1].answer("admin_query_offset_by_time", "query_offset_by_time: the SDK's TIME_LOOKUP_METHOD")
    with pytest.raises(AdminError, match="BoundConsumer.offset_for_time.*set_offsets_by_time") as err:
        _admin(real).offsets_for_times("admr_t2", 1796178898571)
    assert err.value.code == 400
