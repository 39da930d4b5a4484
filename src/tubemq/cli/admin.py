"""A small client for the TubeMQ master's HTTP admin API (``/webapi.htm``), stdlib urllib only.

The same calls work against a real TubeMQ master (web port, default 8080) and the embedded server,
which serves the subset used here: ``admin_add_new_topic_record``, ``admin_query_topic_info``,
``admin_delete_topic_info`` (+ ``admin_remove_topic_info`` on a real master),
``admin_update_topic_control_info``, ``admin_query_consume_group_detail`` and the broker calls
``admin_add_broker_configure``, ``admin_online_broker_configure``, ``admin_reload_broker_configure``,
``admin_query_broker_run_status``. Answers look like ``{"result": bool, "errCode": int,
"errMsg": str, "data": [...]}``; ``result: false`` becomes :class:`AdminError`, and so does a
per-record failure (``data[i].success: false``) of a modify call.
"""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from tubemq.errors import TubeMQConnectionError, TubeMQError

__all__ = ["AdminClient", "AdminError"]

DEFAULT_USER = "tubemq-cli"


class AdminError(TubeMQError):
    """The admin API refused the call (``result: false``); ``code`` is its errCode."""

    def __init__(self, code: int, message: str) -> None:
        self.code = code
        self.message = message
        super().__init__(f"[{code}] {message}" if code else message)


def _normalise_url(url: str) -> str:
    url = url.strip()
    if "://" not in url:
        url = "http://" + url
    parts = urllib.parse.urlsplit(url)
    path = parts.path
    if not path.endswith("webapi.htm"):
        path = path.rstrip("/") + "/webapi.htm"
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, "", ""))


class AdminClient:
    """Calls ``webapi.htm?type=op_query|op_modify&method=...``.

    Queries use GET; modifications use POST with a form body so the ``confModAuthToken`` does not end
    up in access logs (the real master's servlet reads parameters from either).
    """

    def __init__(self, url: str, token: str | None = None, *, user: str = DEFAULT_USER, timeout: float = 10.0) -> None:
        self.url = _normalise_url(url)
        self.token = token
        self.user = user
        self.timeout = timeout

    def __repr__(self) -> str:  # never shows the token
        return f"AdminClient({self.url!r}, token={'***' if self.token else None})"

    # ---- transport

    def call(self, op_type: str, method: str, **params: Any) -> dict[str, Any]:
        """One admin call; returns the decoded JSON answer or raises AdminError / TubeMQConnectionError."""
        query: dict[str, str] = {"type": op_type, "method": method}
        body: dict[str, str] = {}
        target = body if op_type == "op_modify" else query
        for key, value in params.items():
            if value is None:
                continue
            target[key] = str(value).lower() if isinstance(value, bool) else str(value)
        if op_type == "op_modify" and self.token:
            body["confModAuthToken"] = self.token
        url = self.url + "?" + urllib.parse.urlencode(query)
        data = urllib.parse.urlencode(body).encode() if op_type == "op_modify" else None
        req = urllib.request.Request(url, data=data, method="POST" if data is not None else "GET")
        if data is not None:
            req.add_header("Content-Type", "application/x-www-form-urlencoded")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                raw = resp.read(64 * 1024 * 1024)
        except urllib.error.HTTPError as exc:
            detail = ""
            try:
                detail = exc.read(4096).decode("utf-8", "replace").strip()
            except OSError:
                pass
            try:
                answer = json.loads(detail)
                if isinstance(answer, dict) and "errMsg" in answer:
                    raise AdminError(int(answer.get("errCode") or exc.code), str(answer["errMsg"])) from None
            except ValueError:
                pass
            raise AdminError(exc.code, f"HTTP {exc.code} {exc.reason} from {self.url}") from None
        except urllib.error.URLError as exc:
            reason = exc.reason
            if isinstance(reason, ConnectionRefusedError):
                why = "connection refused"
            elif isinstance(reason, socket.timeout | TimeoutError):
                why = "timed out"
            else:
                why = str(reason)
            raise TubeMQConnectionError(f"cannot reach the admin API at {self.url} ({why})") from None
        except TimeoutError:
            raise TubeMQConnectionError(f"the admin API at {self.url} did not answer in {self.timeout:g}s") from None
        except OSError as exc:
            raise TubeMQConnectionError(f"admin API at {self.url}: {exc}") from None
        try:
            answer = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise AdminError(-1, f"the admin API at {self.url} did not answer JSON") from None
        if not isinstance(answer, dict):
            raise AdminError(-1, f"unexpected admin answer: {str(answer)[:200]}")
        if not answer.get("result", False):
            raise AdminError(int(answer.get("errCode") or -1), str(answer.get("errMsg") or "admin call failed"))
        return answer

    # ---- topics

    def create_topic(
        self,
        name: str,
        *,
        partitions: int = 3,
        stores: int = 1,
        broker_id: str = "1",
        max_msg_size_mb: int | None = None,
        accept_publish: bool = True,
        accept_subscribe: bool = True,
    ) -> dict[str, Any]:
        return self.call(
            "op_modify",
            "admin_add_new_topic_record",
            topicName=name,
            brokerId=broker_id,
            numPartitions=partitions,
            numTopicStores=stores,
            maxMsgSizeInMB=max_msg_size_mb,
            acceptPublish=accept_publish,
            acceptSubscribe=accept_subscribe,
            createUser=self.user,
            createDate=time.strftime("%Y%m%d%H%M%S"),
        )

    def query_topics(self, name: str | None = None) -> list[dict[str, Any]]:
        answer = self.call("op_query", "admin_query_topic_info", topicName=name)
        data = answer.get("data") or []
        return [d for d in data if isinstance(d, dict)] if isinstance(data, list) else []

    def delete_topic(self, name: str, *, broker_id: str = "1", purge: bool = False) -> None:
        """Soft delete (``admin_delete_topic_info``); ``purge`` adds the real master's hard remove step."""
        stamp = time.strftime("%Y%m%d%H%M%S")
        self.call(
            "op_modify", "admin_delete_topic_info", topicName=name, brokerId=broker_id, modifyUser=self.user,
            modifyDate=stamp,
        )
        if purge:
            self.call(
                "op_modify", "admin_remove_topic_info", topicName=name, brokerId=broker_id, modifyUser=self.user,
                modifyDate=stamp,
            )

    def group_detail(self, group: str) -> dict[str, Any]:
        return self.call("op_query", "admin_query_consume_group_detail", consumeGroup=group)

    def set_topic_max_msg_size(self, name: str, max_msg_size_mb: int) -> None:
        """``admin_update_topic_control_info``: the brokers refuse larger messages from then on."""
        self.modify_records(
            "admin_update_topic_control_info", topicName=name, maxMsgSizeInMB=max_msg_size_mb, modifyUser=self.user
        )

    # ---- brokers

    def modify_records(self, method: str, **params: Any) -> list[dict[str, Any]]:
        """A modify call whose ``data`` lists one result per record: any ``success: false`` raises."""
        data = self.call("op_modify", method, **params).get("data") or []
        rows = [d for d in data if isinstance(d, dict)] if isinstance(data, list) else []
        for row in rows:
            if row.get("success") is False:
                what = row.get("topicName") or f"broker {row.get('brokerId')}"
                raise AdminError(int(row.get("errCode") or -1), f"{what}: {row.get('errInfo') or 'failed'}")
        return rows

    def add_broker(
        self, ip: str, *, broker_id: int | None = None, port: int | None = None, tls_port: int | None = None,
        web_port: int | None = None,
    ) -> list[dict[str, Any]]:
        return self.modify_records(
            "admin_add_broker_configure", brokerIp=ip, brokerId=broker_id, brokerPort=port, brokerTLSPort=tls_port,
            brokerWebPort=web_port, createUser=self.user, createDate=time.strftime("%Y%m%d%H%M%S"),
        )

    def online_brokers(self, broker_ids: str) -> list[dict[str, Any]]:
        return self.modify_records("admin_online_broker_configure", brokerId=broker_ids, modifyUser=self.user)

    def reload_brokers(self, broker_ids: str) -> list[dict[str, Any]]:
        return self.modify_records("admin_reload_broker_configure", brokerId=broker_ids, modifyUser=self.user)

    def broker_run_status(self, broker_ids: str | None = None) -> list[dict[str, Any]]:
        data = self.call("op_query", "admin_query_broker_run_status", brokerId=broker_ids).get("data") or []
        return [d for d in data if isinstance(d, dict)] if isinstance(data, list) else []
