"""The subset of the real master's HTTP admin API (``/webapi.htm``) that scripts use most.

``GET|POST /webapi.htm?type=op_query|op_modify&method=...`` with parameters in the query string or a
form body (the real servlet reads both). Answers are JSON shaped like the real master's:
``{"result": bool, "errCode": int, "errMsg": str, "data": [...]}``; the group detail follows the
captured ``admin_api`` snapshots (s2, s3, s5). Modify calls require ``confModAuthToken`` when the
server has an ``admin_token``.

Methods: ``admin_add_new_topic_record``, ``admin_query_topic_info``, ``admin_delete_topic_info``
(+ ``admin_remove_topic_info``, a no-op after delete, as scripts for real masters call both),
``admin_query_consume_group_detail``.

A deliberately small HTTP/1.1 server on asyncio streams: one request per connection
(``Connection: close``), bounded header and body sizes and a read timeout, so a stuck or hostile
client costs one bounded coroutine.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import urllib.parse
from collections.abc import Callable
from typing import Any

from tubemq.errors import ConfigError
from tubemq.protocol.constants import DEFAULT_MAX_MSG_SIZE

from .config import ServerConfig
from .meta import MetaStore, TopicConf

log = logging.getLogger("tubemq.server.admin")

MAX_HEADER_BYTES = 64 * 1024
MAX_BODY_BYTES = 1024 * 1024
READ_TIMEOUT_S = 30.0
MAX_ADMIN_CONNECTIONS = 64

ERR_BAD_REQUEST = 400
ERR_UNAUTHORIZED = 401
ERR_NOT_FOUND = 404
MB = 1024 * 1024


class _AdminError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _ok(**extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"result": True, "errCode": 0, "errMsg": "OK"}
    out.update(extra)
    return out


def _fail(code: int, message: str) -> dict[str, Any]:
    return {"result": False, "errCode": code, "errMsg": message, "data": []}


def _param(
    params: dict[str, str], name: str, default: str | None = None, *, required: bool = False
) -> str | None:
    value = params.get(name)
    if value is None or not value.strip():
        if required:
            raise _AdminError(ERR_BAD_REQUEST, f"Parameter {name} is required and must not be blank!")
        return default
    return value.strip()


def _int_param(params: dict[str, str], name: str, default: int, lo: int, hi: int) -> int:
    text = _param(params, name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise _AdminError(ERR_BAD_REQUEST, f"Parameter {name} must be an integer, got {text!r}") from None
    if not lo <= value <= hi:
        raise _AdminError(ERR_BAD_REQUEST, f"Parameter {name} must be within [{lo}, {hi}], got {value}")
    return value


def _bool_param(params: dict[str, str], name: str, default: bool) -> bool:
    text = _param(params, name)
    if text is None:
        return default
    if text.lower() in ("true", "1", "yes"):
        return True
    if text.lower() in ("false", "0", "no"):
        return False
    raise _AdminError(ERR_BAD_REQUEST, f"Parameter {name} must be true or false, got {text!r}")


def _topic_names(params: dict[str, str], *, required: bool) -> list[str]:
    text = _param(params, "topicName", required=required)
    if text is None:
        return []
    return [t.strip() for t in text.split(",") if t.strip()]


class AdminApi:
    """The request logic, independent of HTTP (unit-testable): ``handle(params) -> JSON dict``."""

    def __init__(
        self,
        config: ServerConfig,
        meta: MetaStore,
        master: Any,
        broker: Any = None,
        *,
        create_topic: Callable[..., TopicConf] | None = None,
        delete_topic: Callable[[str], bool] | None = None,
    ) -> None:
        self.config = config
        self.meta = meta
        self.master = master
        self.broker = broker
        self._create = create_topic or meta.create_topic
        self._delete = delete_topic or meta.delete_topic

    def handle(self, params: dict[str, str]) -> dict[str, Any]:
        try:
            op = _param(params, "type", required=True)
            method = _param(params, "method", required=True)
            handler = self._methods().get((op or "", method or ""))
            if handler is None:
                raise _AdminError(ERR_BAD_REQUEST, f"Unsupported method {method} for type {op}")
            if op == "op_modify":
                self._check_token(params)
            return handler(params)
        except _AdminError as exc:
            return _fail(exc.code, exc.message)

    def _methods(self) -> dict[tuple[str, str], Callable[[dict[str, str]], dict[str, Any]]]:
        return {
            ("op_modify", "admin_add_new_topic_record"): self._add_topic,
            ("op_modify", "admin_delete_topic_info"): self._delete_topic,
            ("op_modify", "admin_remove_topic_info"): self._remove_topic,
            ("op_query", "admin_query_topic_info"): self._query_topics,
            ("op_query", "admin_query_consume_group_detail"): self._group_detail,
        }

    def _check_token(self, params: dict[str, str]) -> None:
        expected = self.config.admin_token
        if expected is None:
            return
        given = params.get("confModAuthToken", "")
        if not hmac.compare_digest(given.encode(), expected.encode()):
            raise _AdminError(ERR_UNAUTHORIZED, "Illegal access, unauthorized request!")

    def _broker_ids(self, params: dict[str, str]) -> None:
        text = _param(params, "brokerId")
        if text is None:
            return
        for item in text.split(","):
            item = item.strip()
            if not item:
                continue
            try:
                bid = int(item)
            except ValueError:
                raise _AdminError(
                    ERR_BAD_REQUEST, f"Parameter brokerId must be integers, got {text!r}"
                ) from None
            if bid not in self.meta.brokers:
                raise _AdminError(ERR_BAD_REQUEST, f"Broker {bid} is not configured on this master")

    def _add_topic(self, params: dict[str, str]) -> dict[str, Any]:
        names = _topic_names(params, required=True)
        self._broker_ids(params)
        partitions = _int_param(params, "numPartitions", 3, 1, 10000)
        stores = _int_param(params, "numTopicStores", 1, 1, 100)
        max_mb = _int_param(params, "maxMsgSizeInMB", 0, 0, 20)
        max_size = max_mb * MB if max_mb else None
        accept_pub = _bool_param(params, "acceptPublish", True)
        accept_sub = _bool_param(params, "acceptSubscribe", True)
        existing = [n for n in names if self.meta.get(n) is not None]
        if existing:
            raise _AdminError(ERR_BAD_REQUEST, f"Topic {', '.join(existing)} already exists!")
        created = []
        for name in names:
            try:
                conf = self._create(name, partitions, stores, max_size)
            except (ConfigError, ValueError) as exc:
                raise _AdminError(ERR_BAD_REQUEST, str(exc)) from None
            if not (accept_pub and accept_sub):
                conf = self.meta.update_topic(name, accept_publish=accept_pub, accept_subscribe=accept_sub)
            created.append(self._topic_record(conf))
        return _ok(data=created)

    def _delete_topic(self, params: dict[str, str]) -> dict[str, Any]:
        names = _topic_names(params, required=True)
        self._broker_ids(params)
        missing = [n for n in names if self.meta.get(n) is None]
        if missing:
            raise _AdminError(ERR_BAD_REQUEST, f"Topic {', '.join(missing)} not found!")
        for name in names:
            self._delete(name)
        return _ok(data=[{"topicName": n} for n in names])

    def _remove_topic(self, params: dict[str, str]) -> dict[str, Any]:
        names = _topic_names(params, required=True)
        for name in names:
            if self.meta.get(name) is not None:
                self._delete(name)
        return _ok(data=[{"topicName": n} for n in names])

    def _query_topics(self, params: dict[str, str]) -> dict[str, Any]:
        wanted = set(_topic_names(params, required=False))
        topics = [t for t in self.meta.topics() if not wanted or t.name in wanted]
        return _ok(count=len(topics), data=[self._topic_record(t) for t in topics])

    def _topic_record(self, conf: TopicConf) -> dict[str, Any]:
        default = self.config.default_max_msg_size or DEFAULT_MAX_MSG_SIZE
        size = conf.effective_max_msg_size(default)
        per_broker = []
        for bid in sorted(self.meta.brokers):
            b = self.meta.brokers[bid]
            per_broker.append(
                {
                    "topicName": conf.name,
                    "brokerId": bid,
                    "brokerIp": b.host,
                    "brokerPort": b.port,
                    "numPartitions": conf.num_partitions,
                    "numTopicStores": conf.num_stores,
                    "acceptPublish": conf.accept_publish,
                    "acceptSubscribe": conf.accept_subscribe,
                    "maxMsgSizeInMB": size // MB,
                    "topicStatusId": 1 if conf.closed else 0,
                    "createDate": conf.create_time_ms,
                }
            )
        total = conf.num_partitions * conf.num_stores * len(per_broker)
        return {
            "topicName": conf.name,
            "infoCount": len(per_broker),
            "totalCfgNumPart": total,
            "isSrvAcceptPublish": conf.accept_publish and not conf.closed,
            "isSrvAcceptSubscribe": conf.accept_subscribe and not conf.closed,
            "totalRunNumPartCount": total,
            "topicInfo": per_broker,
        }

    def _group_detail(self, params: dict[str, str]) -> dict[str, Any]:
        group = _param(params, "consumeGroup", required=True) or ""
        detail: dict[str, Any] = self.master.group_detail(group)
        return detail


class AdminServer:
    """HTTP listener for ``AdminApi`` on ``config.host:config.admin_port`` (0 = ephemeral)."""

    def __init__(self, api: AdminApi, host: str, port: int) -> None:
        self.api = api
        self.host = host
        self.port = port
        self._server: asyncio.base_events.Server | None = None
        self._conns: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/webapi.htm"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, self.port, limit=MAX_HEADER_BYTES)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("admin API listening on %s", self.url)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for t in list(self._conns):
            t.cancel()
        for t in list(self._conns):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        if self._server is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._server.wait_closed(), 5)
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if len(self._conns) >= MAX_ADMIN_CONNECTIONS or task is None:
            writer.close()
            return
        self._conns.add(task)
        try:
            status, body = await asyncio.wait_for(self._read_and_handle(reader), READ_TIMEOUT_S)
            await self._respond(writer, status, body)
        except (asyncio.TimeoutError, ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.LimitOverrunError:
            with contextlib.suppress(ConnectionError):
                await self._respond(writer, 431, _fail(ERR_BAD_REQUEST, "request header too large"))
        except Exception:  # never let one request kill the listener
            log.exception("admin request failed")
        finally:
            self._conns.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _read_and_handle(self, reader: asyncio.StreamReader) -> tuple[int, dict[str, Any]]:
        first = await reader.readexactly(1)
        if not (b"A" <= first <= b"Z" or b"a" <= first <= b"z"):
            # not an HTTP method (e.g. a TubeMQ RPC frame: a client pointed at this port): say so at
            # once, as Jetty does, instead of waiting for a header end that never comes
            return 400, _fail(ERR_BAD_REQUEST, "not an HTTP request")
        head = first + await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            return 400, _fail(ERR_BAD_REQUEST, "bad request line")
        verb, target = parts[0].upper(), parts[1]
        headers = {}
        for line in lines[1:]:
            if ":" in line:
                k, _, v = line.partition(":")
                headers[k.strip().lower()] = v.strip()
        if verb not in ("GET", "POST"):
            return 405, _fail(ERR_BAD_REQUEST, f"method {verb} not allowed")
        split = urllib.parse.urlsplit(target)
        if not split.path.rstrip("/").endswith("webapi.htm"):
            return 404, _fail(ERR_NOT_FOUND, f"no such path {split.path}")
        params = dict(urllib.parse.parse_qsl(split.query, keep_blank_values=True))
        if verb == "POST":
            try:
                length = int(headers.get("content-length", "0"))
            except ValueError:
                return 400, _fail(ERR_BAD_REQUEST, "bad Content-Length")
            if length < 0 or length > MAX_BODY_BYTES:
                return 413, _fail(ERR_BAD_REQUEST, "request body too large")
            body = await reader.readexactly(length) if length else b""
            ctype = headers.get("content-type", "")
            text = body.decode("utf-8", "replace")
            if "json" in ctype and text.strip():
                try:
                    obj = json.loads(text)
                except ValueError:
                    return 400, _fail(ERR_BAD_REQUEST, "request body is not JSON")
                if isinstance(obj, dict):
                    params.update(
                        {str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in obj.items()}
                    )
            else:
                params.update(urllib.parse.parse_qsl(text, keep_blank_values=True))
        return 200, self.api.handle(params)

    @staticmethod
    async def _respond(writer: asyncio.StreamWriter, status: int, body: dict[str, Any]) -> None:
        payload = json.dumps(body, ensure_ascii=False).encode()
        reason = {
            200: "OK",
            400: "Bad Request",
            404: "Not Found",
            405: "Method Not Allowed",
            413: "Payload Too Large",
            431: "Request Header Fields Too Large",
        }.get(status, "Error")
        head = (
            f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json;charset=UTF-8\r\n"
            f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n"
        )
        writer.write(head.encode("latin-1") + payload)
        await writer.drain()
