"""How long ``AdminClient.offsets_for_times`` takes on a big store, against reading the store's index
linearly to the same answer (what a lookup without the binary search would cost).

    python bench/bench_time_lookup.py --messages 200000 --rounds 5

Runs its own embedded server (127.0.0.1, temporary directory); prints medians.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import tubemq
from tubemq.admin import AdminClient
from tubemq.server import EmbeddedCluster
from tubemq.server.storage import ENTRY, INDEX_ENTRY


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, EmbeddedCluster(data_dir=Path(tmp)) as cluster:
        cluster.create_topic("bench_time", partitions=1)
        marks = []
        with tubemq.Producer(cluster.master_address) as p:
            futures = []
            for i in range(args.messages):
                if i % (args.messages // 4) == 0:
                    marks.append(int(time.time() * 1000))
                futures.append(p.send_async("bench_time", b"x" * 100))
            for f in futures:
                f.result()
        admin = AdminClient(cluster.admin_url)
        store = cluster._server.nodes[0].stores.get("bench_time", 0)
        lookup, scan = [], []
        for _ in range(args.rounds):
            for ts in marks[1:]:
                t0 = time.perf_counter()
                (found,) = admin.offsets_for_times("bench_time", ts)
                lookup.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                linear = _linear(store, ts)
                scan.append(time.perf_counter() - t0)
                assert linear == found.offset, (linear, found.offset)
        print(f"{args.messages} messages: offsets_for_times over HTTP median {statistics.median(lookup) * 1000:.2f} ms; "
              f"linear index scan in-process median {statistics.median(scan) * 1000:.2f} ms")


def _linear(store: object, ts: int) -> int:
    import os

    for seg in store.segments:  # type: ignore[attr-defined]
        fd, _ = seg.read_fds()
        raw = os.pread(fd, seg.idx_len, 0)
        for i, entry in enumerate(INDEX_ENTRY.iter_unpack(raw[: len(raw) - len(raw) % ENTRY])):
            if entry[4] >= ts:
                return int(seg.idx_base + i * ENTRY)
    return int(store.max_offset)  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()
