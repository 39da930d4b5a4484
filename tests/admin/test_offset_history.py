"""The embedded broker's offset history file: search by time, the real broker's refusals, bounds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tubemq.server.admin import offset_history
from tubemq.server.admin.offset_history import OffsetHistory


def _write(h: OffsetHistory, group: str, times: list[int]) -> None:
    for dt in times:
        h._append(group, {"dt": dt, "group": group, "records": []})


def test_find_first_record_at_or_after(tmp_path: Path) -> None:
    h = OffsetHistory(tmp_path)
    _write(h, "g", [60_000, 120_000, 600_000])
    assert h.find("g", 100_000, 400_000)["dt"] == 120_000
    with pytest.raises(ValueError, match="Over required endTime range"):
        h.find("g", 130_000, 400_000)
    with pytest.raises(ValueError, match="Not found record"):
        h.find("g", 700_000, 800_000)
    with pytest.raises(ValueError, match="Not found record"):
        h.find("other", 0, 1)
    with open(h.root / offset_history._file_name("g"), "a", encoding="utf-8") as f:
        f.write('{"dt": 9')  # torn by a crash: skipped
    assert h.find("g", 500_000, 700_000)["dt"] == 600_000


def test_history_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(offset_history, "MAX_RECORDS", 5)
    h = OffsetHistory(tmp_path)
    _write(h, "g", list(range(0, 60_000 * 30, 60_000)))
    lines = (h.root / offset_history._file_name("g")).read_text().splitlines()
    assert 5 <= len(lines) <= 10
    assert json.loads(lines[-1])["dt"] == 60_000 * 29
    assert OffsetHistory(tmp_path).find("g", 60_000 * 29, 60_000 * 30)["dt"] == 60_000 * 29
