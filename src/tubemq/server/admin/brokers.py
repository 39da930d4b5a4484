"""Broker configure records of the admin API: manage statuses, record shapes and their JSON file."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from .params import ERR_BAD_REQUEST, _AdminError, _param

log = logging.getLogger("tubemq.server.admin")

STATUS_DRAFT = "draft"
STATUS_ONLINE = "online"
STATUS_OFFLINE = "offline"
#: ManageStatus descriptions -> (accept publish, accept subscribe)
_PUB_SUB = {
    "draft": (False, False),
    "online": (True, True),
    "only-read": (False, True),
    "only-write": (True, False),
    "offline": (False, False),
}
ONLINE_STATUSES = frozenset({"online", "only-read", "only-write"})
#: The real master's defaults for a broker record (ClusterSettingEntity) and DataOpErrCode values.
DEFAULT_BROKER_PORT = 8123
DEFAULT_BROKER_TLS_PORT = 8124
DEFAULT_BROKER_WEB_PORT = 8081
ERR_NOT_EXIST = 401
ERR_EXISTS = 402
ERR_UNCHANGED = 403
ERR_ILLEGAL_STATUS = 406
ERR_ILLEGAL_CHANGE = 407


def _manage_status(params: dict[str, str], default: str) -> str:
    text = _param(params, "manageStatus") or _param(params, "mSts")
    if text is None:
        return default
    for status in _PUB_SUB:
        if status == text.lower():
            return status
    raise _AdminError(
        ERR_BAD_REQUEST, f"Illegal manageStatus parameter value :unknown broker manage status name {text}"
    )


def _broker_record(
    bid: int, ip: str, port: int, tls_port: int, web_port: int, status: str, *, region_id: int = 0, group_id: int = 0
) -> dict[str, Any]:
    return {
        "brokerId": bid,
        "brokerIp": ip,
        "brokerPort": port,
        "brokerTLSPort": tls_port,
        "brokerWebPort": web_port,
        "regionId": region_id,
        "groupId": group_id,
        "manageStatus": status,
        "createUser": "",
        "modifyUser": "",
    }


def _broker_result(bid: int, ip: str, code: int = 200, info: str = "Ok!") -> dict[str, Any]:
    """One entry of the real master's per-broker answer (WebBrokerConfHandler.buildRetInfo)."""
    return {"brokerId": bid, "brokerIp": ip, "success": code == 200, "errCode": code, "errInfo": info}


def _topic_result(name: str, code: int = 200, info: str = "Ok!") -> dict[str, Any]:
    return {"topicName": name, "success": code == 200, "errCode": code, "errInfo": info}


class BrokerConfs:
    """Broker configure records added through the admin API, kept in ``admin_brokers.json``."""

    FILE = "admin_brokers.json"
    MAX_RECORDS = 10000

    def __init__(self, data_dir: Path) -> None:
        self.path = Path(data_dir) / self.FILE
        self.records: dict[int, dict[str, Any]] = {}
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            log.warning("ignoring unreadable %s: %s", self.path, exc)
            return
        if isinstance(raw, list):
            for rec in raw[: self.MAX_RECORDS]:
                if isinstance(rec, dict) and isinstance(rec.get("brokerId"), int):
                    self.records[rec["brokerId"]] = rec

    def remove(self, broker_id: int) -> None:
        if self.records.pop(broker_id, None) is not None:
            self._write()

    def put(self, rec: dict[str, Any]) -> None:
        if rec["brokerId"] not in self.records and len(self.records) >= self.MAX_RECORDS:
            raise _AdminError(ERR_BAD_REQUEST, f"too many broker configure records (at most {self.MAX_RECORDS})")
        self.records[rec["brokerId"]] = dict(rec)
        self._write()

    def _write(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(list(self.records.values())), encoding="utf-8")
        tmp.replace(self.path)
