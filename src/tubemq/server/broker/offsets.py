"""Committed consumer-group offsets of the broker, persisted per group (JSON, atomic write + rename).

Why per-group files: a group's commits are written together and groups are independent; a crash
loses at most the commits of the last persist interval (the real broker also flushes offsets
periodically), never a whole file.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

log = logging.getLogger("tubemq.server.offsets")


def _file_name(group: str) -> str:
    # group names may contain any character on the RPC path (§4.0): hex keeps file names safe
    return group.encode("utf-8", "surrogatepass").hex() + ".json"


class OffsetStore:
    """(group, topic, partition id) -> committed index offset."""

    def __init__(self, data_dir: Path | str) -> None:
        self.root = Path(data_dir) / "offsets"
        self.root.mkdir(parents=True, exist_ok=True)
        self._groups: dict[str, dict[tuple[str, int], int]] = {}
        self._dirty: set[str] = set()
        for path in sorted(self.root.glob("*.json")):
            try:
                data = json.loads(path.read_text("utf-8"))
                group = data["group"]
                offsets = {}
                for key, value in data["offsets"].items():
                    topic, _, pid = key.rpartition(":")
                    offsets[(topic, int(pid))] = int(value)
            except (OSError, ValueError, KeyError, TypeError) as exc:
                log.error("ignoring unreadable offset file %s: %s", path, exc)
                continue
            self._groups[group] = offsets

    def get(self, group: str, topic: str, partition_id: int) -> int | None:
        g = self._groups.get(group)
        return None if g is None else g.get((topic, partition_id))

    def set(self, group: str, topic: str, partition_id: int, offset: int) -> None:
        g = self._groups.setdefault(group, {})
        if g.get((topic, partition_id)) != offset:
            g[(topic, partition_id)] = offset
            self._dirty.add(group)

    def groups(self) -> list[str]:
        return sorted(self._groups)

    def partitions(self, group: str) -> dict[tuple[str, int], int]:
        return dict(self._groups.get(group, {}))

    def drop_topic(self, topic: str) -> None:
        for group, offsets in self._groups.items():
            for key in [k for k in offsets if k[0] == topic]:
                del offsets[key]
                self._dirty.add(group)

    def save(self) -> None:
        """Persist every group changed since the last save."""
        dirty, self._dirty = self._dirty, set()
        for group in dirty:
            offsets = self._groups.get(group, {})
            path = self.root / _file_name(group)
            try:
                if not offsets:
                    path.unlink(missing_ok=True)
                    continue
                data = {"group": group, "offsets": {f"{t}:{p}": o for (t, p), o in sorted(offsets.items())}}
                tmp = path.with_suffix(".tmp")
                with open(tmp, "w", encoding="utf-8") as f:
                    json.dump(data, f)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, path)
            except OSError as exc:
                log.error("could not persist offsets of group %r: %s", group, exc)
                self._dirty.add(group)
