"""The test data the suite carries: real-server captures, golden vectors, Java-encoded frames.

Everything lives in ``tests/data`` next to this file, so the suite runs the same in a fresh clone, an
unpacked sdist and CI. A missing file is an error (``FileNotFoundError``), never a reason to skip: a test
that silently stops checking fidelity is worse than a red one.

Layout: ``data/captures/*.json`` (recorded against a real TubeMQ master and broker; ``captures/README.md``
explains the format), ``data/vectors.json`` and ``data/java_golden_frames.json``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DATA_DIR = Path(__file__).resolve().parent / "data"
CAPTURES_DIR = DATA_DIR / "captures"


def data_path(*parts: str) -> Path:
    """The path of a data file; raises FileNotFoundError naming it when it is absent."""
    path = DATA_DIR.joinpath(*parts)
    if not path.is_file():
        raise FileNotFoundError(f"test data file {path} is missing (tests/data ships with the repository)")
    return path


def load_json(*parts: str) -> Any:
    """A data file parsed as JSON."""
    return json.loads(data_path(*parts).read_text(encoding="utf-8"))


def capture_path(name: str) -> Path:
    """A capture file by scenario name (``"s1_producer"``) or file name (``"s1_producer.json"``)."""
    return data_path("captures", name if name.endswith(".json") else f"{name}.json")


def load_capture(name: str) -> Any:
    """A capture file parsed as JSON."""
    return json.loads(capture_path(name).read_text(encoding="utf-8"))


def vectors() -> list[dict[str, Any]]:
    """The golden vectors (``vectors.json``'s ``vectors`` list)."""
    return list(load_json("vectors.json")["vectors"])


def vector(name: str) -> dict[str, Any]:
    """One golden vector by name; KeyError when the file has none of that name."""
    for v in vectors():
        if v.get("name") == name:
            return v
    raise KeyError(f"no vector named {name!r} in {data_path('vectors.json')}")
