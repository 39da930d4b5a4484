"""Committed consumer-group offsets of the broker, persisted per group (JSON, atomic write + rename).

Why per-group files: a group's commits are written together and groups are independent; the
housekeeping timer saves (and fsyncs) the changed groups about once a second, never tearing a file.

Why a commit journal beside them: an acknowledged commit must survive a broker crash, and rewriting
a group's file per commit costs a rename (ext4 flushes the data of a file renamed over another). The
broker appends each read's commits to ``commits.journal`` (one write) before answering them, fsyncs
it first with ``flush="always"``, and the timer's save empties it once the groups' files hold every
entry; on open the files are read and the journal replayed over them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path

log = logging.getLogger("tubemq.server.offsets")


#: longest file name this module makes (file systems allow 255 bytes; room for a temporary suffix)
_MAX_NAME = 200


def group_file_name(group: str, suffix: str) -> str:
    """A file name for a group's data that any legal group name fits (names reach 1,024 characters).

    Group names may contain any character on the RPC path (§4.0): hex keeps file names safe; a name
    whose hex would pass ``_MAX_NAME`` is named by its SHA-256 instead (``h-`` prefix: no hex name
    starts so), and the file itself holds the real name."""
    raw = group.encode("utf-8", "surrogatepass")
    if 2 * len(raw) + len(suffix) <= _MAX_NAME:
        return raw.hex() + suffix
    return "h-" + hashlib.sha256(raw).hexdigest() + suffix


def _file_name(group: str) -> str:
    return group_file_name(group, ".json")


#: the commit journal's file name (not a group file: no group's name gives it)
JOURNAL = "commits.journal"


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
        self._journal_path = self.root / JOURNAL
        self._journal_fd = -1
        self._replay_journal()

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

    def save(self) -> frozenset[str]:
        """Persist (and fsync) every group changed since the last save; returns the groups that failed
        (kept dirty). Once every group is saved the commit journal is emptied."""
        dirty, self._dirty = self._dirty, set()
        failed: list[str] = []
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
                failed.append(group)
        if not self._dirty and self._journal_fd >= 0:
            try:
                os.ftruncate(self._journal_fd, 0)
            except OSError as exc:  # replaying it again later is harmless: its entries are in the files
                log.warning("could not empty the commit journal: %s", exc)
        return frozenset(failed)

    # ---- the commit journal

    def journal(self, entries: list[tuple[str, str, int, int]]) -> OSError | None:
        """Append committed (group, topic, partition, offset) entries in one write (handed to the OS:
        a killed broker keeps them); the error when that failed."""
        if not entries:
            return None
        data = "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in entries).encode("utf-8", "surrogatepass")
        try:
            if self._journal_fd < 0:
                self._journal_fd = os.open(self._journal_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            view = memoryview(data)
            while view:
                view = view[os.write(self._journal_fd, view):]
        except OSError as exc:
            log.error("could not journal %d commits: %s", len(entries), exc)
            return exc
        return None

    def sync_journal(self) -> None:
        """fsync the journal (a worker thread may call it; raises the OSError)."""
        fd = self._journal_fd
        if fd >= 0:
            os.fsync(fd)

    def _replay_journal(self) -> None:
        try:
            raw = self._journal_path.read_bytes()
        except FileNotFoundError:
            return
        except OSError as exc:
            log.error("cannot read the commit journal %s: %s", self._journal_path, exc)
            return
        for line in raw.decode("utf-8", "surrogatepass").splitlines():
            try:
                group, topic, pid, offset = json.loads(line)
                self.set(str(group), str(topic), int(pid), int(offset))
            except (ValueError, TypeError):
                continue  # a torn last line after a crash

    def close(self) -> None:
        fd, self._journal_fd = self._journal_fd, -1
        if fd >= 0:
            os.close(fd)
