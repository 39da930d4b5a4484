"""Spark data source throughput: batch write and batch read of N rows through ``format("tubemq")``.

The embedded server runs as ``python -m tubemq.server`` in a subprocess (its own process, like a
real broker); Spark runs ``local[2]`` on 127.0.0.1. Scenarios (each after a small warm-up that
starts the Python workers):

* ``spark write``  ``df.write.format("tubemq")`` of N rows of SIZE bytes (2 Spark partitions)
* ``spark read``   ``spark.read.format("tubemq")...load()`` of those rows, summing ``length(value)``
                   so every value crosses into the JVM; then the same rows again with
                   ``.schema("value BINARY")`` (only the column the query uses)
* ``plain write``  one ``tubemq.Producer`` in this process: pipelined ``send_async`` of N messages with the
                   Spark write task's window of unacknowledged messages
* ``plain read``   one ``tubemq.Consumer`` in this process iterating N messages from the earliest offset
                   (clock from the first message: the server-side rebalance wait is excluded)

and the ratio of each Spark figure to its plain-Python counterpart. The analysis splits a Spark read
into a fixed cost per query and a rate per row (a 20 000-row read next to each big one, taken after a
throwaway one: Spark stops Python workers idle for a minute, and the first query after a pause pays
for fresh ones, reported separately) and, on Linux, counts the CPU seconds each process spent per row
(the JVM, Spark's Python workers and the server for the Spark read; this process and the server for
the plain loop). ``--rounds N`` alternates the Spark
and the plain runs N times (fresh topics each round), so that a change of load hits both sides; the
verdicts against the targets of issue 12 (read >= 0.9x, write >= 1.0x of the plain loop) are computed
from the median ratio. With ``--results`` the "Spark" section of bench/RESULTS.md is replaced (other
sections are left alone).

Usage: python bench/bench_spark.py [--rows 1000000] [--size 100] [--partitions 2] [--rounds 1] [--results]
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_server import create_topic, embedded_server  # noqa: E402

import tubemq  # noqa: E402
from tubemq import codec  # noqa: E402

RESULTS = Path(__file__).with_name("RESULTS.md")
WARM = 20_000  # rows of the warm-up topic (also the small read of the fixed-cost estimate)
VALUE_ONLY = "value BINARY"  # the read schema of the value-only Spark read


def cpu_seconds() -> dict[str, float]:
    """CPU seconds (user + system) so far of this process and its descendants, by role: "server"
    (``python -m tubemq.server``), "jvm" (Spark), "workers" (Spark's Python workers), "self".
    Empty where /proc is missing."""
    if not os.path.isdir("/proc/self"):
        return {}
    tick = os.sysconf("SC_CLK_TCK")
    stats: dict[str, list[str]] = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                stats[pid] = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
    mine = {str(os.getpid())}
    grown = True
    while grown:
        more = {pid for pid, st in stats.items() if st[1] in mine} - mine
        grown = bool(more)
        mine |= more
    out: dict[str, float] = {}
    for pid in mine & stats.keys():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if pid == str(os.getpid()):
            role = "self"
        elif b"tubemq.server" in argv:
            role = "server"
        elif argv and argv[0].endswith(b"java"):
            role = "jvm"
        else:
            role = "workers"
        st = stats[pid]
        out[role] = out.get(role, 0.0) + (int(st[11]) + int(st[12])) / tick
    return out


def cpu_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """CPU seconds per role between two ``cpu_seconds()`` (a process that ended in between is left out)."""
    return {k: after[k] - before[k] for k in after if k in before and after[k] >= before[k]}


def spark_session(tmp: str) -> Any:
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("tubemq-bench")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.warehouse.dir", os.path.join(tmp, "warehouse"))
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def value_expr(size: int) -> str:
    """``size`` bytes per row: a 12-digit row number padded with 'x' (distinct, checkable)."""
    return f"cast(concat(lpad(cast(id as string), 12, '0'), repeat('x', {size - 12})) as binary) as value"


def spark_write(spark: Any, master: str, topic: str, rows: int, size: int) -> float:
    df = spark.range(0, rows, 1, 2).selectExpr(value_expr(size))
    t0 = time.perf_counter()
    df.write.format("tubemq").option("tubemq.master", master).option("topic", topic).mode("append").save()
    return rows / (time.perf_counter() - t0)


def spark_read(spark: Any, master: str, topic: str, rows: int, size: int, schema: str | None = None) -> float:
    t0 = time.perf_counter()
    reader = spark.read.format("tubemq").option("tubemq.master", master).option("subscribe", topic)
    df = (reader if schema is None else reader.schema(schema)).load()
    count, total = df.selectExpr("count(*)", "sum(length(value))").collect()[0]
    elapsed = time.perf_counter() - t0
    if count != rows or total != rows * size:
        raise SystemExit(f"spark read {count} rows / {total} bytes, expected {rows} / {rows * size}")
    return rows / elapsed


def plain_write(master: str, topic: str, rows: int, size: int) -> float:
    """A plain pipelined loop with the Spark write task's window (``writer.WRITE_WINDOW`` unacknowledged)."""
    from tubemq.cli.pipeline import SendPipeline
    from tubemq.spark.writer import WRITE_WINDOW

    pad = b"x" * (size - 12)
    t0 = time.perf_counter()
    with tubemq.Producer(master) as p:
        pipe = SendPipeline(p, topic, inflight=WRITE_WINDOW)
        for i in range(rows):
            if not pipe.submit(b"%012d" % i + pad):
                break
        pending = pipe.drain(120)
    if pending or pipe.acked != rows:
        raise SystemExit(f"plain write: {pipe.acked} of {rows} acknowledged, first error {pipe.first_error!r}")
    return rows / (time.perf_counter() - t0)


def plain_read(master: str, topic: str, rows: int, size: int) -> float:
    n = total = 0
    t0 = 0.0
    with tubemq.Consumer(master, group=f"bench-plain-{os.getpid()}", topics=[topic], consume_from="earliest") as c:
        deadline = time.monotonic() + 600
        for msg in c:
            if not n:
                t0 = time.perf_counter()  # the clock starts at the first message (rebalance wait excluded)
            n += 1
            total += len(msg.data)
            if n >= rows or time.monotonic() > deadline:
                break
        elapsed = time.perf_counter() - t0
    if n != rows or total != rows * size:
        raise SystemExit(f"plain read {n} messages / {total} bytes, expected {rows} / {rows * size}")
    return rows / elapsed


def write_results(text: str) -> None:
    """Replace (or append) the "## Spark" section of RESULTS.md, leaving the others untouched."""
    old = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
    section = text.rstrip() + "\n"
    pattern = re.compile(r"^## Spark\b.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(old):
        new = pattern.sub(lambda _: section + "\n", old, count=1)
    else:
        new = old.rstrip() + "\n\n" + section
    RESULTS.write_text(new.rstrip() + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=1, help="alternating Spark / plain rounds (default 1)")
    ap.add_argument("--results", action="store_true", help="write the Spark section of bench/RESULTS.md")
    args = ap.parse_args()
    if args.size < 13:
        raise SystemExit("--size must be at least 13 bytes")
    import pyspark

    with tempfile.TemporaryDirectory() as tmp:
        data_dir = os.path.join(tmp, "data")
        with embedded_server(data_dir, stop_timeout=30) as (mport, bport, aport):
            master = f"127.0.0.1:{mport}"
            names = ["warm"] + [f"{kind}{r}" for r in range(args.rounds) for kind in ("sparkt", "plaint")]
            for name in names:
                create_topic(aport, name, args.partitions)
            time.sleep(1.0)  # let the broker report the topics to the master
            spark = spark_session(tmp)
            runs: list[dict[str, float]] = []
            cpu: dict[str, list[dict[str, float]]] = {"spark": [], "value": [], "plain": []}
            try:
                spark_write(spark, master, "warm", WARM, args.size)  # start the Python workers
                spark_read(spark, master, "warm", WARM, args.size)
                for r in range(args.rounds):
                    run: dict[str, float] = {}
                    # alternate which side goes first, so a trend in the load does not favour one
                    order = ("spark", "plain") if r % 2 == 0 else ("plain", "spark")
                    for side in order:
                        if side == "spark":
                            run["sw"] = spark_write(spark, master, f"sparkt{r}", args.rows, args.size)
                            # the first read after the write may find Spark's read-side Python workers
                            # stopped (idle > 1 min): a throwaway small read measures that, then a small
                            # read next to the big one separates the fixed cost per query (planning,
                            # scheduling, worker hand-off) from the cost per row
                            run["cold"] = WARM / spark_read(spark, master, "warm", WARM, args.size)
                            run["small"] = WARM / spark_read(spark, master, "warm", WARM, args.size)
                            c0 = cpu_seconds()
                            run["sr"] = spark_read(spark, master, f"sparkt{r}", args.rows, args.size)
                            cpu["spark"].append(cpu_delta(c0, cpu_seconds()))
                            # the same rows with a schema naming only the column the query uses
                            c0 = cpu_seconds()
                            run["sv"] = spark_read(spark, master, f"sparkt{r}", args.rows, args.size, VALUE_ONLY)
                            cpu["value"].append(cpu_delta(c0, cpu_seconds()))
                        else:
                            run["pw"] = plain_write(master, f"plaint{r}", args.rows, args.size)
                            c0 = cpu_seconds()
                            run["pr"] = plain_read(master, f"plaint{r}", args.rows, args.size)
                            cpu["plain"].append(cpu_delta(c0, cpu_seconds()))
                    print(f"round {r + 1}: spark write {run['sw']:,.0f} / plain write {run['pw']:,.0f} rows/s "
                          f"({run['sw'] / run['pw']:.2f}); spark read {run['sr']:,.0f} / plain read "
                          f"{run['pr']:,.0f} rows/s ({run['sr'] / run['pr']:.2f}); spark read of value only "
                          f"{run['sv']:,.0f} rows/s ({run['sv'] / run['pr']:.2f})", flush=True)
                    runs.append(run)
            finally:
                spark.stop()
            # the source's own share of the fixed cost: planning (one BoundConsumer asks for the offsets)
            from tubemq.spark.options import parse_read_options
            from tubemq.spark.reader import plan_batch_ranges

            plan_opts = parse_read_options({"tubemq.master": master, "subscribe": "sparkt0"}, streaming=False)
            plan_runs = []
            for _ in range(3):
                t_plan = time.perf_counter()
                plan_batch_ranges(plan_opts)
                plan_runs.append(time.perf_counter() - t_plan)
            plan_s = statistics.median(plan_runs)

    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())

    def med(key: str) -> float:
        return statistics.median(run[key] for run in runs)

    write_ratio = statistics.median(run["sw"] / run["pw"] for run in runs)
    read_ratio = statistics.median(run["sr"] / run["pr"] for run in runs)
    value_ratio = statistics.median(run["sv"] / run["pr"] for run in runs)

    def verdict(ratio: float, target: float) -> str:
        return f"{'met' if ratio >= target else '**missed**'} (target >= {target:g}x)"

    # big read = fixed + rows / rate, small read = fixed + WARM / rate (same session, same round)
    fits = [(run["sr"], run["small"]) for run in runs]
    big_s = statistics.median(args.rows / sr for sr, _ in fits)
    small_s = statistics.median(small for _, small in fits)
    per_row = (big_s - small_s) / max(args.rows - WARM, 1)
    fixed_s = small_s - WARM * per_row
    split = (
        f"Split of a Spark read, from a {WARM:,}-row read next to each big one (medians): about "
        f"{fixed_s:.1f} s fixed per query (Spark's planning and scheduling, the hand-off to the Python "
        f"workers, and the source's planning of the read ranges: {plan_s:.2f} s of it) and "
        f"{1 / per_row:,.0f} rows/s beyond it"
        if per_row > 0 and fixed_s > 0
        else "The small and the big read did not separate into a fixed cost and a per-row rate (noise)"
    )
    cold_s = statistics.median(run["cold"] - run["small"] for run in runs)
    if cold_s > 0.05:
        split += (f"; the first read after the write (Spark had stopped its idle Python workers) took "
                  f"{cold_s:.1f} s longer")
    split += (f"; the plain loop reads at {med('pr'):,.0f} rows/s, so without the fixed cost the read would "
              f"run at {(1 / per_row) / med('pr'):.2f}x of it." if per_row > 0 and fixed_s > 0 else ".")
    def per_row(side: str, role: str) -> str:
        values = [c[role] for c in cpu[side] if role in c]
        return f"{statistics.median(values) / args.rows * 1e6:.2f}" if values else "n/a"

    if cpu["spark"] and cpu["plain"]:
        split += (
            f"\n\nCPU per row read (microseconds, medians; /proc of this process and its children): Spark read = "
            f"JVM {per_row('spark', 'jvm')} + Python workers {per_row('spark', 'workers')} + server "
            f"{per_row('spark', 'server')}; plain loop = client {per_row('plain', 'self')} + server "
            f"{per_row('plain', 'server')}"
            + (f"; Spark read of `value` only = JVM {per_row('value', 'jvm')} + Python workers "
               f"{per_row('value', 'workers')} + server {per_row('value', 'server')}." if cpu["value"] else ".")
        )
    spread = ""
    if len(runs) > 1:
        spread = "\n\nPer round (spark / plain rows/s, write then read): " + "; ".join(
            f"{run['sw']:,.0f} / {run['pw']:,.0f}, {run['sr']:,.0f} ({run['sv']:,.0f} value only) / {run['pr']:,.0f}"
            for run in runs) + "."
    table = f"""## Spark

`python bench/bench_spark.py --rows {args.rows} --size {args.size} --partitions {args.partitions} --rounds {args.rounds}`:
{args.rows:,} rows of {args.size} B through `format("tubemq")` on Spark `local[2]` (PySpark
{pyspark.__version__}), **embedded server** in a subprocess on 127.0.0.1, topic with {args.partitions} partitions
(one store), codec `{codec.implementation}`, Python {platform.python_version()}, {os.cpu_count()} cores.
Plain = one `tubemq.Producer` (pipelined `send_async`, the write task's window) / one `tubemq.Consumer` (iteration, clock
from the first message) in one Python process moving the same rows without Spark; Spark and plain runs
alternate ({args.rounds} round{'s' if args.rounds > 1 else ''}), figures are medians.

| operation | Spark rows/s | plain Python rows/s | Spark / plain | verdict |
| --- | ---: | ---: | ---: | --- |
| batch write | {med('sw'):,.0f} | {med('pw'):,.0f} | {write_ratio:.2f} | {verdict(write_ratio, 1.0)} |
| batch read | {med('sr'):,.0f} | {med('pr'):,.0f} | {read_ratio:.2f} | {verdict(read_ratio, 0.9)} |
| batch read, `.schema("{VALUE_ONLY}")` | {med('sv'):,.0f} | {med('pr'):,.0f} | {value_ratio:.2f} | {verdict(value_ratio, 0.9)} |

The second read row reads the same rows again with a schema naming only the column the query uses (the source
then builds and ships only that column); the first is the fixed schema. Spark times include planning and task scheduling (Python workers already started by a warm-up).
Load average when the run ended: {load} (other processes share the {os.cpu_count()} cores).
{split}{spread}
"""
    print(table)
    if args.results:
        write_results(table)


if __name__ == "__main__":
    main()
