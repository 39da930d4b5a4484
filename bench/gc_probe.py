"""Run a Python script with the cycle collector's work counted.

``python bench/gc_probe.py bench/compare.py --phases consume ...`` runs the script as ``__main__`` and,
at exit, prints one JSON line to stderr: collections per generation, objects collected, and the wall
seconds spent inside collections (``gc.callbacks``; the collector holds the GIL, so on an idle core
that is its CPU). Counts cover the whole process, startup included.
"""

from __future__ import annotations

import atexit
import gc
import json
import runpy
import sys
import time
from typing import Any

_inside = {"t0": 0.0, "seconds": 0.0}


def _callback(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _inside["t0"] = time.perf_counter()
    else:
        _inside["seconds"] += time.perf_counter() - _inside["t0"]


def _report(before: list[dict[str, int]]) -> None:
    after = gc.get_stats()
    out = {
        "gc_collections": [a["collections"] - b["collections"] for a, b in zip(after, before, strict=True)],
        "gc_collected": sum(a["collected"] - b["collected"] for a, b in zip(after, before, strict=True)),
        "gc_seconds": round(_inside["seconds"], 4),
    }
    print(json.dumps(out), file=sys.stderr, flush=True)


def main() -> None:
    if len(sys.argv) < 2:
        raise SystemExit("usage: python bench/gc_probe.py SCRIPT [ARGS...]")
    atexit.register(_report, gc.get_stats())
    gc.callbacks.append(_callback)
    sys.argv = sys.argv[1:]
    runpy.run_path(sys.argv[0], run_name="__main__")


if __name__ == "__main__":
    main()
