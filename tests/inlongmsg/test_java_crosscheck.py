"""Random inputs beyond the golden vectors, as the unmodified upstream Java class handled them.

v4 attribute keys: 120 random binary messages (up to 60 common keys, up to
20 private keys per message) as decoded by the unmodified upstream Java class (recorded in
tests/data/inlongmsg/v4_java_crosscheck.json). Java's ``HashMap`` order must match exactly, including
table resizes the 9-key vectors never reach; Java's Guava errors (duplicate keys) must be our errors.
Builds: 150 random raw v1-v3 builders (tests/data/inlongmsg/build_java_crosscheck.json) must return the
same ``add()`` results and the same bytes.
"""

from __future__ import annotations

import json
import pathlib
from types import ModuleType
from typing import Any

import pytest

from tubemq.errors import InLongMsgError

DATA = pathlib.Path(__file__).resolve().parents[1] / "data" / "inlongmsg" / "v4_java_crosscheck.json"


def _cases() -> list[dict[str, Any]]:
    doc = json.loads(DATA.read_text(encoding="utf-8"))  # a missing file fails collection
    assert doc["format"] == "inlongmsg-v4-java-crosscheck"
    return list(doc["cases"])


CASES = _cases()


def test_crosscheck_covers_big_maps() -> None:
    assert len(CASES) == 120
    assert max(c["java"][0]["attr"].count("&") for c in CASES if isinstance(c["java"], list)) > 48


@pytest.mark.parametrize("case", CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_v4_keys_match_java(api: ModuleType, case: dict[str, Any]) -> None:
    data = bytes.fromhex(case["encoded_hex"])
    if isinstance(case["java"], str):
        with pytest.raises(InLongMsgError):
            api.decode(data)
        return
    m = api.decode(data)
    assert list(m.attrs) == [g["attr"] for g in case["java"]]
    assert [[bytes(b).hex() for b in m.bodies(g["attr"])] for g in case["java"]] == [
        g["bodies_hex"] for g in case["java"]
    ]


BUILDS = json.loads((DATA.parent / "build_java_crosscheck.json").read_text(encoding="utf-8"))


def test_build_crosscheck_file() -> None:
    assert BUILDS["format"] == "inlongmsg-build-java-crosscheck" and len(BUILDS["cases"]) == 150


@pytest.mark.parametrize("case", BUILDS["cases"], ids=[f"build{i}" for i in range(len(BUILDS["cases"]))])
def test_random_builds_match_java(api: ModuleType, case: dict[str, Any]) -> None:
    """Random v1-v3 adds (non-ASCII, emoji, NUL and long attrs; small capacities): same add() results, same bytes."""
    b = api.InLongMsgBuilder(case["version"], False, case["capacity"])
    results = "".join("T" if b.add(op["attr"], bytes.fromhex(op["data_hex"])) else "F" for op in case["adds"])
    assert results == case["java_add_results"]
    assert b.build(case["createtime"]).hex() == case["java_hex"]
