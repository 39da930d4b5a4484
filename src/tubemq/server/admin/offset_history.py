"""The broker's consume-offset history: what ``admin_set_offset_by_time`` restores.

A real broker writes, every ``groupOffsetScanDurMs`` (60 s by default), one record per online group
(a group with a registered consumer) holding each partition's confirmed and in-flight offsets, into
its internal ``__offset_history__`` topic (``OffsetRecordService``); ``admin_set_offset_by_time``
then puts a group back to the first record of it at or after a time. The embedded broker keeps the
same records as JSON lines, one file per group under ``<data dir>/offset_history``, at most
``MAX_RECORDS`` per group (a week at one a minute), so the history is bounded on disk.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..broker.offsets import group_file_name

if TYPE_CHECKING:
    from ..broker import Broker
    from ..config import ServerConfig

log = logging.getLogger("tubemq.server.offset_history")


class ServedBroker(Protocol):
    """What the offset history and the broker web API read of a broker node (``cluster.BrokerNode``)."""

    @property
    def broker_id(self) -> int: ...

    @property
    def config(self) -> ServerConfig: ...

    @property
    def broker(self) -> Broker: ...

#: TServerConstants.CFG_DEFAULT_GROUP_OFFSET_SCAN_DUR (tests lower it before starting a server).
HISTORY_INTERVAL_MS = 60_000
MAX_RECORDS = 7 * 24 * 60
#: TBaseConstants.OFFSET_HISTORY_RECORD_VERSION_3
RECORD_VERSION = 3


def _file_name(group: str) -> str:
    return group_file_name(group, ".jsonl")


class OffsetHistory:
    """One broker's offset history records (append, bounded, searched by time)."""

    def __init__(self, data_dir: Path | str) -> None:
        self.root = Path(data_dir) / "offset_history"
        self._counts: dict[str, int] = {}

    def record(self, broker: Broker, now_ms: int | None = None) -> int:
        """Write one record per online group; returns how many were written."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        online = sorted(broker.registrations.groups())
        for group in online:
            self._append(group, self._snapshot(broker, group, now_ms))
        return len(online)

    @staticmethod
    def _snapshot(broker: Broker, group: str, now_ms: int) -> dict[str, Any]:
        keys = set(broker.offsets.partitions(group)) | broker.registrations.partitions(group)
        topics: dict[str, dict[int, list[dict[str, int]]]] = {}
        for topic_name, pid in sorted(keys):
            topic = broker.catalog.topic(topic_name)
            store = broker.catalog.store_for(topic, pid) if topic is not None else None
            if store is None:
                continue
            committed = broker.offsets.get(group, topic_name, pid)
            cfm = store.min_offset if committed is None else committed
            flight = cfm + broker.registrations.inflight((group, topic_name, pid))
            topics.setdefault(topic_name, {}).setdefault(pid // 10000, []).append(
                {"partId": pid, "iCfm": cfm, "iFlt": flight})
        records = [
            {"topic": t, "offsets": [{"storeId": s, "parts": parts} for s, parts in sorted(stores.items())]}
            for t, stores in sorted(topics.items())
        ]
        return {"dt": now_ms, "bId": broker.config.broker_id, "ver": RECORD_VERSION, "group": group, "on": 1,
                "records": records}

    def _append(self, group: str, rec: dict[str, Any]) -> None:
        path = self.root / _file_name(group)
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            with open(path, "a", encoding="utf-8") as f:
                f.write(json.dumps(rec, separators=(",", ":")) + "\n")
            count = self._counts.get(group)
            if count is None:  # first append since start: count what the file holds
                with open(path, encoding="utf-8") as f:
                    count = sum(1 for _ in f)
            else:
                count += 1
            self._counts[group] = count
            if count > 2 * MAX_RECORDS:
                self._trim(path, group)
        except OSError as exc:
            log.warning("offset history of group %r not recorded: %s", group, exc)

    def _trim(self, path: Path, group: str) -> None:
        with open(path, encoding="utf-8") as f:
            lines = f.readlines()[-MAX_RECORDS:]
        tmp = path.with_suffix(".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            f.writelines(lines)
        os.replace(tmp, path)
        self._counts[group] = len(lines)

    def find_all(self, group: str, start_ms: int, count: int) -> list[dict[str, Any]]:
        """Up to ``count`` records of ``group`` at or after ``start_ms``, oldest first."""
        out: list[dict[str, Any]] = []
        try:
            with open(self.root / _file_name(group), encoding="utf-8") as f:
                for line in f:
                    try:
                        rec = json.loads(line)
                    except ValueError:
                        continue  # a torn last line after a crash
                    if isinstance(rec, dict) and int(rec.get("dt", -1)) >= start_ms:
                        out.append(rec)
                        if len(out) >= count:
                            break
        except FileNotFoundError:
            pass
        return out

    def find(self, group: str, start_ms: int, end_ms: int) -> dict[str, Any]:
        """The first record of ``group`` at or after ``start_ms``; ValueError with the real broker's
        message when there is none or when it lies after ``end_ms``."""
        path = self.root / _file_name(group)
        try:
            with open(path, encoding="utf-8") as f:
                for line in f:
                    try:
                        rec = json.loads(line)
                    except ValueError:
                        continue  # a torn last line after a crash
                    if not isinstance(rec, dict) or int(rec.get("dt", -1)) < start_ms:
                        continue
                    minute = int(rec["dt"]) // 60_000 * 60_000
                    if minute > end_ms:
                        stamp = time.strftime("%Y%m%d%H%M", time.localtime(minute / 1000))
                        raise ValueError(f"Over required endTime range, current time is {stamp}")
                    return rec
        except FileNotFoundError:
            pass
        raise ValueError("Not found record in required search range")


async def run(nodes: Callable[[], Sequence[ServedBroker]], histories: dict[int, OffsetHistory]) -> None:
    """Record every ``HISTORY_INTERVAL_MS`` for every broker of this process (until cancelled)."""
    while True:
        await asyncio.sleep(HISTORY_INTERVAL_MS / 1000.0)
        for node in nodes():
            history = histories.get(node.broker_id)
            if history is None:
                history = histories[node.broker_id] = OffsetHistory(node.config.data_dir)
            try:
                history.record(node.broker)
            except Exception:  # noqa: BLE001 - the recorder must survive one bad round
                log.exception("offset history round failed for broker %d", node.broker_id)
