"""InLongMsg fixtures: every test runs on both implementations (Cython and the pure-Python twin).

The Cython parameter is skipped only when TUBEMQ_NO_EXTENSIONS=1; otherwise a missing extension fails.
The golden vectors live in tests/data/inlongmsg/ (a missing file fails, never skips).
"""

from __future__ import annotations

import json
import os
import pathlib
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest

from tubemq import inlongmsg
from tubemq.codec import _inlongmsg_py

NO_EXT = os.environ.get("TUBEMQ_NO_EXTENSIONS", "") not in ("", "0")
VECTORS = pathlib.Path(__file__).resolve().parents[1] / "data" / "inlongmsg" / "vectors.json"


def load_vectors() -> dict[str, Any]:
    return json.loads(VECTORS.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def cases() -> list[dict[str, Any]]:
    return list(load_vectors()["cases"])


def _cython() -> ModuleType:
    from tubemq.codec import _inlongmsg  # an ImportError here is a real failure, not a skip

    return _inlongmsg


IMPLS = [
    pytest.param("cython", marks=pytest.mark.skipif(NO_EXT, reason="TUBEMQ_NO_EXTENSIONS=1")),
    "python",
]


def impl_module(name: str) -> ModuleType:
    return _cython() if name == "cython" else _inlongmsg_py


@pytest.fixture(params=IMPLS)
def impl(request: pytest.FixtureRequest) -> ModuleType:
    return impl_module(request.param)


@pytest.fixture
def api(impl: ModuleType, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """``tubemq.inlongmsg`` running on the implementation under test."""
    monkeypatch.setattr(inlongmsg, "_impl", impl)
    yield inlongmsg
