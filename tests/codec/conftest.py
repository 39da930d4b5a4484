"""Codec test fixtures: every test runs against both implementations (Cython and the pure-Python twin).

The Cython parameter is skipped only when TUBEMQ_NO_EXTENSIONS=1; otherwise a missing extension fails.
"""

from __future__ import annotations

import json
import os
import pathlib
from types import ModuleType
from typing import Any

import pytest

from tubemq import _codec_py

NO_EXT = os.environ.get("TUBEMQ_NO_EXTENSIONS", "") not in ("", "0")

#: The shared protocol folder (vectors.json, java_golden_frames.json); TUBEMQ_PROTOCOL_DIR overrides it.
PROTOCOL_DIR = pathlib.Path(
    os.environ.get("TUBEMQ_PROTOCOL_DIR", pathlib.Path(__file__).resolve().parents[3] / "shared" / "protocol")
)
#: Copies committed next to the tests, so the suite also runs where ../shared does not exist (CI, wheels).
LOCAL_DATA = pathlib.Path(__file__).resolve().parent / "data"


def load_json(name: str) -> Any:
    for folder in (PROTOCOL_DIR, LOCAL_DATA):
        path = folder / name
        if path.exists():
            return json.loads(path.read_text(encoding="utf-8"))
    raise FileNotFoundError(f"{name} not found in {PROTOCOL_DIR} or {LOCAL_DATA}")


def _cython() -> ModuleType:
    from tubemq import _codec  # an ImportError here is a real failure, not a skip

    return _codec


IMPLS = [
    pytest.param("python", id="python"),
    pytest.param(
        "cython",
        id="cython",
        marks=pytest.mark.skipif(NO_EXT, reason="TUBEMQ_NO_EXTENSIONS=1: Cython codec not tested"),
    ),
]


@pytest.fixture(params=IMPLS)
def impl(request: pytest.FixtureRequest) -> ModuleType:
    """The codec implementation under test."""
    return _codec_py if request.param == "python" else _cython()


@pytest.fixture(scope="session")
def vectors() -> dict[str, dict[str, Any]]:
    return {v["name"]: v for v in load_json("vectors.json")["vectors"]}


@pytest.fixture(scope="session")
def golden_frames() -> list[dict[str, Any]]:
    return load_json("java_golden_frames.json")["frames"]
