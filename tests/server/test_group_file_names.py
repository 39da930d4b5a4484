"""Any legal group name (up to 1,024 characters on the wire) keeps its offsets and offset history:
the files are named by hex for short names and by a hash for long ones (the name is inside)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tubemq.server.admin.offset_history import OffsetHistory
from tubemq.server.broker.offsets import OffsetStore

NAMES = ["g", "g" * 124, "g" * 125, "é" * 300, "x" * 1024, "grp/with:odd\\chars" * 40]


def test_every_legal_group_name_saves_and_reloads(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = OffsetStore(tmp_path)
    for i, name in enumerate(NAMES):
        store.set(name, "t", 0, 28 * (i + 1))
        store.set(name, "t", 1, 56 * (i + 1))
    with caplog.at_level(logging.ERROR, logger="tubemq.server.offsets"):
        store.save()
    assert not caplog.records, [r.getMessage()[:200] for r in caplog.records]
    files = sorted((tmp_path / "offsets").iterdir())
    assert len(files) == len(NAMES) and all(len(f.name.encode()) <= 255 for f in files)
    again = OffsetStore(tmp_path)
    assert sorted(again.groups()) == sorted(NAMES)
    for i, name in enumerate(NAMES):
        assert again.partitions(name) == {("t", 0): 28 * (i + 1), ("t", 1): 56 * (i + 1)}
    again.set(NAMES[4], "t", 0, 0)
    again.drop_topic("t")
    again.save()
    assert not list((tmp_path / "offsets").iterdir())  # emptied groups remove their (hash-named) file


def test_offset_history_of_a_long_group_name(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    hist = OffsetHistory(tmp_path)
    with caplog.at_level(logging.WARNING, logger="tubemq.server.offset_history"):
        for name in NAMES:
            hist._append(name, {"dt": 1000, "group": name, "records": []})
    assert not caplog.records, [r.getMessage()[:200] for r in caplog.records]
    for name in NAMES:
        assert hist.find(name, 0, 10**12)["group"] == name
