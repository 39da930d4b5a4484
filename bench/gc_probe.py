"""The cycle collector's work, in a consumer or in a decode loop shaped like one.

``python bench/gc_probe.py bench/compare.py --phases consume ...`` runs the script as ``__main__`` and,
at exit, prints one JSON line to stderr: collections per generation, objects collected, and the wall
seconds spent inside collections (``gc.callbacks``; the collector holds the GIL, so on an idle core
that is its CPU). Counts cover the whole process, startup included.

``python bench/gc_probe.py --decode plain|attrs N`` decodes a 600-message getMessage answer (Cython
codec) N times while holding the last 8 results, as a consumer's prefetch buffer does, and prints the
collections of those N calls and the CPU ns per message. Under cachegrind (two N, difference) it gives
the instructions per answer, the collector's share included (bench/RESULTS.md, "Consumer").
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


def decode_window(kind: str, n: int) -> None:
    """N decodes of one 600-message answer, the last 8 results held (see the module docstring)."""
    import collections

    from test_bench_codec import _get_message_body

    from tubemq.codec import compiled as _codec
    from tubemq.codec import python as _codec_py

    body = _get_message_body(600, kind == "attrs")
    p = _codec_py.Partition(1, "10.0.0.1", 8123, "demo", 0)
    held: collections.deque[Any] = collections.deque(maxlen=8)
    decode = _codec.decode_get_message_response
    for _ in range(20):
        held.append(decode(body, "demo", p))
    before = gc.get_stats()
    t0 = time.process_time()
    for _ in range(n):
        held.append(decode(body, "demo", p))
    cpu = time.process_time() - t0
    counts = [a["collections"] - b["collections"] for a, b in zip(gc.get_stats(), before, strict=True)]
    print(json.dumps({"kind": kind, "answers": n, "gc_collections": counts,
                      "ns_per_message": round(cpu / n / 600 * 1e9, 1)}), file=sys.stderr, flush=True)


def main() -> None:
    if len(sys.argv) < 2:
        raise SystemExit("usage: python bench/gc_probe.py SCRIPT [ARGS...] | --decode plain|attrs N")
    if sys.argv[1] == "--decode":
        decode_window(sys.argv[2], int(sys.argv[3]))
        return
    atexit.register(_report, gc.get_stats())
    gc.callbacks.append(_callback)
    sys.argv = sys.argv[1:]
    runpy.run_path(sys.argv[0], run_name="__main__")


if __name__ == "__main__":
    main()
