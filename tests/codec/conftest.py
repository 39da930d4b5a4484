"""Codec test fixtures: every test runs against both implementations (Cython and the pure-Python twin).

The Cython parameter is skipped only when TUBEMQ_NO_EXTENSIONS=1; otherwise a missing extension fails.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any

import pytest
from _data import load_json

from tubemq.codec import python as _codec_py

NO_EXT = os.environ.get("TUBEMQ_NO_EXTENSIONS", "") not in ("", "0")



def _cython() -> ModuleType:
    from tubemq.codec import compiled as _codec  # an ImportError here is a real failure, not a skip

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
