"""The Spark skip check: Java 17+ found through JAVA_HOME (java or java.exe) or PATH."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from _java import find_java, java_missing, parse_java_major


@pytest.mark.parametrize(("text", "major"), [
    ('openjdk version "17.0.15" 2025-04-15\nOpenJDK Runtime Environment', 17),
    ('openjdk version "21" 2023-09-19', 21),
    ('java version "1.8.0_402"\nJava(TM) SE Runtime Environment', 8),
    ('openjdk version "11.0.22" 2024-01-16 LTS', 11),
    ('Picked up JAVA_TOOL_OPTIONS: -Xmx1g\nopenjdk version "25-ea" 2025-09-16', 25),
    ("no version here", None),
])
def test_parse_java_major(text: str, major: int | None) -> None:
    assert parse_java_major(text) == major


@pytest.mark.skipif(sys.platform == "win32", reason="fake java is a POSIX shell script")
@pytest.mark.parametrize(("version", "ok"), [("11.0.22", False), ("1.8.0_402", False), ("17.0.2", True)])
def test_java_home_version_decides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: str, ok: bool) -> None:
    java = tmp_path / "bin" / "java"
    java.parent.mkdir()
    java.write_text(f'#!/bin/sh\necho \'openjdk version "{version}" 2024-01-16\' >&2\n')
    java.chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    assert find_java() == str(java)
    reason = java_missing.__wrapped__(need_pyspark=False)  # type: ignore[attr-defined]
    if ok:
        assert reason is None
    else:
        assert reason is not None and "needs Java 17+" in reason


def test_no_java_anywhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))  # no bin/java inside
    monkeypatch.setenv("PATH", str(tmp_path))
    reason = java_missing.__wrapped__(need_pyspark=False)  # type: ignore[attr-defined]
    assert reason is not None and "not installed" in reason
