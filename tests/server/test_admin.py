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
        assert (r["result"], r["errCode"], r["errMsg"]) == (
            False,
            401,
            "Illegal access, unauthorized request!",
        )
        assert meta.get("adm_t") is None
        r = _post(url, q, {**form, "confModAuthToken": "sekret"})
        assert r["result"] and r["errCode"] == 0
        conf = meta.get("adm_t")
        assert conf is not None and conf.num_partitions == 4 and conf.max_msg_size == 2 * 1024 * 1024
        r = _post(url, q, {**form, "confModAuthToken": "sekret"})
        assert not r["result"] and "already exists" in r["errMsg"]
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
        assert r["result"] and meta.get("adm_t") is None
        r = _post(
            url,
            {"type": "op_modify", "method": "admin_remove_topic_info"},
            {"topicName": "adm_t", "confModAuthToken": "sekret"},
        )
        assert r["result"]
        r = _post(url, dq, {"topicName": "adm_t", "confModAuthToken": "sekret"})
        assert not r["result"] and "not found" in r["errMsg"]

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
