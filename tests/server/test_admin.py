"""Admin HTTP API (``/webapi.htm``) over real TCP, standalone (master + meta, no broker)."""

from __future__ import annotations

import asyncio
import json
import socket
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tubemq.protocol import master_pb
from tubemq.server.admin import AdminApi, AdminServer
from tubemq.server.config import ServerConfig
from tubemq.server.master import Master
from tubemq.server.meta import BrokerEntry, MetaStore
from tubemq.server.rpc import RpcContext


def _get(url: str, **params: str) -> dict[str, Any]:
    with urllib.request.urlopen(url + "?" + urllib.parse.urlencode(params), timeout=5) as r:
        return json.loads(r.read())


def _post(url: str, query: dict[str, str], form: dict[str, str]) -> dict[str, Any]:
    req = urllib.request.Request(
        url + "?" + urllib.parse.urlencode(query), data=urllib.parse.urlencode(form).encode(), method="POST"
    )
    with urllib.request.urlopen(req, timeout=5) as r:
        return json.loads(r.read())


def _raw(port: int, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(data)
        chunks = []
        while True:
            b = s.recv(65536)
            if not b:
                break
            chunks.append(b)
        return b"".join(chunks)


def run_admin(tmp_path: Path, token: str | None, body: Any) -> None:
    async def main() -> None:
        cfg = ServerConfig(data_dir=tmp_path, admin_token=token)
        meta = MetaStore(tmp_path)
        meta.set_broker(BrokerEntry(1, "127.0.0.1", 8123))
        master = Master(cfg, meta)
        server = AdminServer(AdminApi(cfg, meta, master), "127.0.0.1", 0)
        await server.start()
        try:
            await asyncio.wait_for(asyncio.to_thread(body, server.url, server.port, master, meta), 30)
        finally:
            await server.stop()

    asyncio.run(main())


def test_topic_lifecycle_and_token(tmp_path: Path) -> None:
    def body(url: str, port: int, master: Master, meta: MetaStore) -> None:
        q = {"type": "op_modify", "method": "admin_add_new_topic_record"}
        form = {"topicName": "adm_t", "brokerId": "1", "numPartitions": "4", "maxMsgSizeInMB": "2"}
        r = _post(url, q, form)
        assert r == {"result": False, "errCode": 400,  # the real master's answer, word for word
                     "errMsg": "Bad request from client, Parameter confModAuthToken is missing or value is blank!"}
        assert meta.get("adm_t") is None
        r = _post(url, q, {**form, "confModAuthToken": "sekret"})
        assert r["result"] and r["errCode"] == 0
        conf = meta.get("adm_t")
        assert conf is not None and conf.num_partitions == 4 and conf.max_msg_size == 2 * 1024 * 1024
        r = _post(url, q, {**form, "confModAuthToken": "sekret"})
        assert r["result"] and r["data"] == [{"brokerId": 1, "topicName": "adm_t", "success": False, "errCode": 402,
                                              "errInfo": "Existed record found for brokerId-topicName(1:adm_t)!"}]
        r = _post(url, q, {"topicName": "1bad", "confModAuthToken": "sekret"})
        assert not r["result"] and r["errCode"] == 400
        r = _get(url, type="op_query", method="admin_query_topic_info", topicName="adm_t")
        assert r["result"] and len(r["data"]) == 1
        rec = r["data"][0]
        assert rec["topicName"] == "adm_t" and rec["totalCfgNumPart"] == 4
        assert rec["topicInfo"][0]["numPartitions"] == 4 and rec["topicInfo"][0]["maxMsgSizeInMB"] == 2
        from tubemq.cli.topic import topic_row

        assert topic_row(rec)["partitions"] == 4 and topic_row(rec)["max_msg_size_mb"] == 2
        r = _get(url, type="op_query", method="admin_query_topic_info")
        assert [d["topicName"] for d in r["data"]] == ["adm_t"]
        dq = {"type": "op_modify", "method": "admin_delete_topic_info"}
        r = _post(url, dq, {"topicName": "adm_t", "brokerId": "1", "confModAuthToken": "nope"})
        assert not r["result"] and meta.get("adm_t") is not None
        r = _post(url, dq, {"topicName": "adm_t", "brokerId": "1", "confModAuthToken": "sekret"})
        assert r["result"] and r["data"][0]["errCode"] == 406 and meta.get("adm_t") is not None
        mq = {"type": "op_modify", "method": "admin_modify_topic_info"}
        flags = {"acceptPublish": "false", "acceptSubscribe": "false"}
        r = _post(url, mq, {"topicName": "adm_t", "brokerId": "1", **flags, "confModAuthToken": "sekret"})
        assert r["data"][0]["success"] is True
        r = _post(url, dq, {"topicName": "adm_t", "brokerId": "1", "confModAuthToken": "sekret"})
        assert r["result"] and r["data"][0]["success"] is True and meta.get("adm_t") is None
        r = _post(
            url,
            {"type": "op_modify", "method": "admin_remove_topic_info"},
            {"topicName": "adm_t", "confModAuthToken": "sekret"},
        )
        assert r["result"]
        r = _post(url, dq, {"topicName": "adm_t", "confModAuthToken": "sekret"})
        assert r["result"] and r["data"][0]["errCode"] == 401 and "Not found the topic adm_t" in r["data"][0]["errInfo"]

    run_admin(tmp_path, "sekret", body)


def test_group_detail_shape(tmp_path: Path) -> None:
    def body(url: str, port: int, master: Master, meta: MetaStore) -> None:
        meta.create_topic("grp_t", 3)
        ctx = RpcContext(1, 1, 3, 4, 10000, "127.0.0.1:5000", 8715, False, time.monotonic())
        req = master_pb.RegisterRequestC2M(clientId="c1", groupName="g1", hostName="h", topicList=["grp_t"])
        assert master.consumer_register(req, ctx).success
        r = _get(url, type="op_query", method="admin_query_consume_group_detail", consumeGroup="g1")
        assert r["result"] and r["count"] == 1 and r["topicSet"] == ["grp_t"] and r["consumeGroup"] == "g1"
        assert r["isBandConsume"] == "unbound" and r["re-rebalance"] == {} and r["filterConds"] == {}
        assert r["data"] == [
            {
                "consumerId": "c1",
                "receivedFrom": "127.0.0.1",
                "isOverTLS": False,
                "parCount": 0,
                "parInfo": [],
            }
        ]
        r = _get(url, type="op_query", method="admin_query_consume_group_detail", consumeGroup="nog")
        assert r["result"] and r["count"] == 0 and r["rebInfo"] == {"isRebalanced": False}

    run_admin(tmp_path, None, body)


def test_bad_requests_get_json_errors(tmp_path: Path) -> None:
    def body(url: str, port: int, master: Master, meta: MetaStore) -> None:
        r = _get(url, type="op_query", method="admin_no_such")
        assert not r["result"] and r["errCode"] == 400
        r = _get(url, type="op_query", method="admin_query_consume_group_detail")
        assert not r["result"] and "consumeGroup" in r["errMsg"]
        # no token configured: modify calls go through
        r = _post(url, {"type": "op_modify", "method": "admin_add_new_topic_record"}, {"topicName": "free_t"})
        assert r["result"] and meta.get("free_t") is not None
        assert _raw(port, b"DELETE /webapi.htm HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 405")
        assert _raw(port, b"GET /other HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 404")
        assert _raw(port, b"garbage\r\n\r\n").startswith(b"HTTP/1.1 400")
        big = b"GET /webapi.htm HTTP/1.1\r\nX: " + b"a" * 70000 + b"\r\n\r\n"
        assert _raw(port, big).startswith(b"HTTP/1.1 431")
        # the listener survived all of that
        assert _get(url, type="op_query", method="admin_query_topic_info")["result"]

    run_admin(tmp_path, None, body)


@pytest.mark.parametrize("value", ["abc", "-1", "30000"])
def test_bad_partition_counts(tmp_path: Path, value: str) -> None:
    def body(url: str, port: int, master: Master, meta: MetaStore) -> None:
        r = _post(
            url,
            {"type": "op_modify", "method": "admin_add_new_topic_record"},
            {"topicName": "t_bad", "numPartitions": value},
        )
        assert not r["result"] and "numPartitions" in r["errMsg"] and meta.get("t_bad") is None

    run_admin(tmp_path, None, body)


def _post_raw(port: int, query: str, body: bytes, ctype: str) -> bytes:
    head = (f"POST /webapi.htm?{query} HTTP/1.1\r\nContent-Type: {ctype}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    return _raw(port, head + body)


def test_deeply_nested_json_body_is_a_400(tmp_path: Path) -> None:
    """Issue 11.9: a deep JSON body raised RecursionError and the connection closed with no answer."""

    def body(url: str, port: int, master: Master, meta: MetaStore) -> None:
        q = "type=op_modify&method=admin_add_new_topic_record"
        for payload in (b"[" * 100000 + b"]" * 100000, b'{"topicName": ' + b"[" * 5000 + b"]" * 5000 + b"}",
                        b'{"topicName": {"a": 1}}', b"[1, 2]"):
            answer = _post_raw(port, q, payload, "application/json")
            assert answer.startswith(b"HTTP/1.1 400"), answer[:80]
            assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["errCode"] == 400
        answer = _post_raw(port, q, b'{"topicName": "json_t", "acceptPublish": true}', "application/json")
        assert answer.startswith(b"HTTP/1.1 200") and meta.get("json_t") is not None

    run_admin(tmp_path, None, body)


@pytest.mark.parametrize("name", ["a\u0660\u0661", "t\u00e9st", "a-b", "\u00e9t"])
def test_topic_names_are_ascii_only_like_java(tmp_path: Path, name: str) -> None:
    """Java's ``^[a-zA-Z]\\w+$`` is ASCII-only: ``a٠١`` (Arabic-Indic digits) and ``tést`` are refused."""

    def body(url: str, port: int, master: Master, meta: MetaStore) -> None:
        r = _post(url, {"type": "op_modify", "method": "admin_add_new_topic_record"}, {"topicName": name})
        assert not r["result"] and r["errCode"] == 400, r
        assert meta.topics() == []

    run_admin(tmp_path, None, body)


def test_topic_name_check_matches_the_whole_name() -> None:
    from tubemq.errors import ConfigError
    from tubemq.server.meta import validate_topic_name

    assert validate_topic_name("ab_9") == "ab_9"
    for bad in ("ab\n", "a\u0660\u0661", "a"):
        with pytest.raises(ConfigError):
            validate_topic_name(bad)


# ---- issue 15.3: the admin calls deployment tooling makes (broker configure, topic control)


def test_topic_control_info_sets_max_msg_size_on_the_topic_record(tmp_path: Path) -> None:
    def body(url: str, port: int, master: Master, meta: MetaStore) -> None:
        meta.create_topic("ctl_t", 2)
        r = _get(url, type="op_query", method="admin_query_topic_info", topicName="ctl_t")
        rec = r["data"][0]
        assert rec["maxMsgSizeInMB"] == 1 and rec["topicInfo"][0]["maxMsgSizeInMB"] == 1
        q = {"type": "op_modify", "method": "admin_update_topic_control_info"}
        r = _post(url, q, {"topicName": "ctl_t,nope_t", "maxMsgSizeInMB": "8", "modifyUser": "ops"})
        assert r["result"] and r["count"] == 2
        assert r["data"][0] == {"topicName": "ctl_t", "success": True, "errCode": 200, "errInfo": "Ok!"}
        assert r["data"][1]["success"] is False and r["data"][1]["errCode"] == 401
        assert "Not found topic control configure for topicName(nope_t)!" == r["data"][1]["errInfo"]
        conf = meta.get("ctl_t")
        assert conf is not None and conf.max_msg_size == 8 * 1024 * 1024
        rec = _get(url, type="op_query", method="admin_query_topic_info", topicName="ctl_t")["data"][0]
        assert rec["maxMsgSizeInMB"] == 8 and rec["topicInfo"][0]["maxMsgSizeInMB"] == 8
        ctl = _get(url, type="op_query", method="admin_query_topic_control_info", topicName="ctl_t")
        assert ctl["data"][0]["maxMsgSizeInMB"] == 8
        for bad in ("0", "21", "x"):
            r = _post(url, q, {"topicName": "ctl_t", "maxMsgSizeInMB": bad})
            assert not r["result"] and "maxMsgSizeInMB" in r["errMsg"]

    run_admin(tmp_path, None, body)


def test_broker_configure_lifecycle_and_run_status(tmp_path: Path) -> None:
    def body(url: str, port: int, master: Master, meta: MetaStore) -> None:
        status = _get(url, type="op_query", method="admin_query_broker_run_status")
        assert status["result"] and status["count"] == 1
        b1 = status["data"][0]
        assert (b1["brokerId"], b1["brokerIp"], b1["brokerPort"], b1["manageStatus"]) == (1, "127.0.0.1", 8123, "online")
        assert (b1["runStatus"], b1["subStatus"], b1["isBrokerOnline"], b1["acceptPublish"]) == (
            "running", "idle", "true", "true")
        add = {"type": "op_modify", "method": "admin_add_broker_configure"}
        r = _post(url, add, {"brokerIp": "10.0.0.2", "brokerId": "2", "brokerPort": "8200", "createUser": "ops"})
        assert r["result"] and r["data"] == [
            {"brokerId": 2, "brokerIp": "10.0.0.2", "success": True, "errCode": 200, "errInfo": "Ok!"}]
        r = _post(url, add, {"brokerIp": "10.0.0.2", "brokerId": "3"})
        assert not r["result"] and r["errMsg"] == "Duplicated broker configure record, query by brokerIp : 10.0.0.2"
        r = _post(url, add, {"brokerIp": "10.0.0.3"})  # id derived from the address, as the real master does
        assert r["result"] and r["data"][0]["brokerId"] == (10 << 24) + 3
        r = _post(url, add, {"brokerIp": "not-an-ip"})
        assert not r["result"] and "brokerIp" in r["errMsg"]
        b2 = _get(url, type="op_query", method="admin_query_broker_run_status", brokerId="2")["data"]
        assert [(b["brokerId"], b["manageStatus"], b["runStatus"]) for b in b2] == [(2, "draft", "-")]
        reload_q = {"type": "op_modify", "method": "admin_reload_broker_configure"}
        r = _post(url, reload_q, {"brokerId": "1,2", "modifyUser": "ops"})
        assert [(d["brokerId"], d["success"], d["errCode"]) for d in r["data"]] == [(1, True, 200), (2, False, 406)]
        online_q = {"type": "op_modify", "method": "admin_online_broker_configure"}
        r = _post(url, online_q, {"brokerId": "2,1,99", "modifyUser": "ops"})
        assert [(d["brokerId"], d["errCode"]) for d in r["data"]] == [(2, 200), (1, 403), (99, 401)]
        b2 = _get(url, type="op_query", method="admin_query_broker_run_status", brokerId="2")["data"][0]
        assert (b2["manageStatus"], b2["runStatus"]) == ("online", "unRegister")  # configured, no process
        confs = _get(url, type="op_query", method="admin_query_broker_configure")["data"]
        assert {c["brokerId"]: c["brokerPort"] for c in confs}[2] == 8200
        # the records survive a restart of the admin API (kept in the data directory)
        from tubemq.server.admin import BrokerConfs

        assert BrokerConfs(meta.data_dir).records[2]["manageStatus"] == "online"

    run_admin(tmp_path, None, body)


def test_max_msg_size_change_reaches_the_broker(tmp_path: Path) -> None:
    """The broker refuses a message over the new size with the real error, and takes it once allowed."""
    from tubemq.cli import main as cli_main
    from tubemq.server import EmbeddedCluster
    from tubemq.server.testing import FAST_CLIENT_TIMERS as FAST_TIMERS

    from ._raw import RawClient

    with EmbeddedCluster(data_dir=tmp_path / "d", **FAST_TIMERS) as cl:
        cl.create_topic("sized", partitions=1)
        big = b"B" * (1536 * 1024)
        with RawClient(cl.broker_address) as c:
            r = c.send("sized", 0, big)
            assert (r.success, r.errCode) == (False, 400)
            assert r.errMsg == f"data length over max length, allowed max length is {1048576 + 10240}, data length is {len(big)}"
            admin = ["--admin-url", cl.admin_url]
            assert cli_main(["topic", "set", "sized", "--max-msg-size-mb", "2", *admin]) == 0
            assert c.send("sized", 0, big).success
            assert cli_main(["topic", "set", "sized", "--max-msg-size-mb", "1", *admin]) == 0
            assert c.send("sized", 0, big).errCode == 400
        assert cli_main(["topic", "set", "nope", "--max-msg-size-mb", "2", *admin]) == 1
        assert cli_main(["topic", "set", "sized", "--max-msg-size-mb", "30", *admin]) == 2


def test_broker_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tubemq.cli import main as cli_main
    from tubemq.server import EmbeddedCluster
    from tubemq.server.testing import FAST_CLIENT_TIMERS as FAST_TIMERS

    with EmbeddedCluster(data_dir=tmp_path / "d", **FAST_TIMERS) as cl:
        admin = ["--admin-url", cl.admin_url]
        assert cli_main(["broker", "list", "-o", "json", *admin]) == 0
        rows = json.loads(capsys.readouterr().out)
        assert [(r["brokerId"], r["runStatus"]) for r in rows] == [(1, "running")]
        assert cli_main(["broker", "add", "10.1.2.3", "--broker-id", "7", *admin]) == 0
        assert cli_main(["broker", "reload", "7", *admin]) == 1  # draft: the real master refuses too
        assert "not in online status" in capsys.readouterr().err
        assert cli_main(["broker", "online", "7", *admin]) == 0
        assert cli_main(["broker", "reload", "1,7", *admin]) == 0
        assert cli_main(["broker", "list", *admin]) == 0
        out = capsys.readouterr().out
        assert "10.1.2.3" in out and "unRegister" in out and "running" in out


@pytest.mark.parametrize("value", ["1_0", "+3", " 3 0", "\u0663", "\uff13", "3.0", "0x3"])
def test_numbers_are_strict_ascii_digits(tmp_path: Path, value: str) -> None:
    """int() alone takes "1_0", "+3" and Unicode digits; the admin API takes ASCII digits only."""

    def body(url: str, port: int, master: Master, meta: MetaStore) -> None:
        q = {"type": "op_modify", "method": "admin_add_new_topic_record"}
        r = _post(url, q, {"topicName": "t_num", "brokerId": "1", "numPartitions": value})
        assert not r["result"] and "numPartitions" in r["errMsg"] and meta.get("t_num") is None
        r = _post(url, q, {"topicName": "t_num", "brokerId": value, "numPartitions": "3"})
        assert not r["result"] and "brokerId" in r["errMsg"] and meta.get("t_num") is None
        r = _post(url, q, {"topicName": "t_num", "brokerId": "1", "numPartitions": "10"})
        assert r["result"] and meta.get("t_num") is not None and meta.get("t_num").num_partitions == 10  # type: ignore[union-attr]

    run_admin(tmp_path, None, body)


def test_a_chunked_body_is_refused_not_taken_as_empty(tmp_path: Path) -> None:
    def body(url: str, port: int, master: Master, meta: MetaStore) -> None:
        chunk = b"topicName=t_chunk&brokerId=1"
        head = (b"POST /webapi.htm?type=op_modify&method=admin_add_new_topic_record HTTP/1.1\r\n"
                b"Content-Type: application/x-www-form-urlencoded\r\nTransfer-Encoding: chunked\r\n\r\n")
        answer = _raw(port, head + b"%x\r\n" % len(chunk) + chunk + b"\r\n0\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 411"), answer[:60]
        assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["result"] is False
        assert meta.get("t_chunk") is None
        bad_length = (b"POST /webapi.htm?type=op_query&method=admin_query_topic_info HTTP/1.1\r\n"
                      b"Content-Length: \xd9\xa3\r\n\r\nabc")
        assert _raw(port, bad_length).startswith(b"HTTP/1.1 400")
        assert _raw(port, bad_length.replace(b"\xd9\xa3", b"+3")).startswith(b"HTTP/1.1 400")

    run_admin(tmp_path, None, body)


def test_record_users_follow_the_real_rule(tmp_path: Path) -> None:
    """The real master's and broker's words for a user name it refuses (tests/data/admin/real)."""
    def body(url: str, port: int, master: Master, meta: MetaStore) -> None:
        q = {"type": "op_modify", "method": "admin_add_new_topic_record"}
        r = _post(url, q, {"topicName": "t_usr", "brokerId": "1", "createUser": "tubemq-admin"})
        assert r == {"result": False, "errCode": 400, "errMsg": "illegal value for createUser, value must begin "
                     "with a letter, can only contain English letters, numbers, and underscores"}
        assert meta.get("t_usr") is None
        r = _post(url, {"type": "op_modify", "method": "admin_modify_topic_info"},
                  {"topicName": "t_usr", "brokerId": "1", "modifyUser": "1ops", "acceptPublish": "false"})
        assert not r["result"] and r["errMsg"].startswith("illegal value for modifyUser")
        r = _post(url, q, {"topicName": "t_usr", "brokerId": "1", "createUser": "tubemq_admin"})
        assert r["result"] and r["data"][0]["success"] and meta.get("t_usr") is not None

    run_admin(tmp_path, None, body)


def test_broker_offline_and_delete_rows(tmp_path: Path) -> None:
    """The real master's rows for taking a broker record offline and deleting it."""
    def body(url: str, port: int, master: Master, meta: MetaStore) -> None:
        add = {"type": "op_modify", "method": "admin_add_broker_configure"}
        off = {"type": "op_modify", "method": "admin_offline_broker_configure"}
        on = {"type": "op_modify", "method": "admin_online_broker_configure"}
        rm = {"type": "op_modify", "method": "admin_delete_broker_configure"}
        assert _post(url, add, {"brokerIp": "127.0.0.3", "brokerId": "3", "createUser": "ops"})["result"]

        def row(q: dict[str, str], bid: str = "3") -> tuple[bool, int, str]:
            r = _post(url, q, {"brokerId": bid, "modifyUser": "ops"})
            d = r["data"][0]
            return d["success"], d["errCode"], d["errInfo"]

        assert row(off) == (False, 407, "Illegal manage status, cannot reverse manageStatus from draft to offline "
                                        "for the broker(brokerId=3)!")
        assert row(on)[0] is True
        assert row(rm) == (False, 406, "Broker manage status is online, please offline first!")
        assert row(off) == (True, 200, "Ok!")
        assert row(off) == (False, 403, "Unchanged  manageStatus(offline)!")
        assert row(rm) == (True, 200, "Ok!")
        r = _get(url, type="op_query", method="admin_query_broker_configure", brokerId="3")
        assert r["data"] == [] and r["count"] == 0
        assert row(rm, "99") == (True, 200, "Success")  # unknown id: success, as the real master
        assert row(off, "99")[1] == 401
        assert row(off, "1")[1] == 406 and row(rm, "1")[1] == 406  # the broker running in this server

    run_admin(tmp_path, None, body)
