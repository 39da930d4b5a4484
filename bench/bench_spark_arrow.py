"""CPU of the Spark read task's Arrow building: ``ArrowBuilder.extend`` + ``flush`` per message.

Decodes one getMessage answer of ``--chunk`` messages of 100 B (with a ``$msgTime$`` attribute, as
producers stamp it; 2 000 is what one 512 KiB broker transfer holds) and feeds it to the builder
until an Arrow batch of 10 000 rows (the default ``arrowBatchSize``) is full, as the read task does. With ``--against REV`` the ``tubemq/spark/schema.py`` of that git revision is
loaded next to the working tree's and both run alternately in this process (same load for both), and
the script checks that they build identical batches.

``--schema "value BINARY"`` builds only the named columns (a user read schema), to compare with the
fixed schema.

Usage: python bench/bench_spark_arrow.py [--against d2750fc] [--rounds 15] [--chunk 2000] [--schema DDL]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from tubemq import codec
from tubemq.protocol import broker_pb

REPO = Path(__file__).resolve().parents[1]


def messages(n: int = 100, size: int = 100) -> list[Any]:
    attr = "$msgTime$=202311231200"
    data = codec.encode_payload(os.urandom(size), attr)
    flag = codec.payload_flag(attr)
    msgs = [broker_pb.TransferedMessage(messageId=1000 + i, checkSum=codec.crc32(data), payLoadData=data, flag=flag)
            for i in range(n)]
    body = broker_pb.GetMessageResponseB2C(
        success=True, errCode=200, errMsg="OK!", messages=msgs, currOffset=0, minLimitTime=0, escFlowCtrl=False,
        currDataDlt=0, requireSlow=False, maxOffset=28 * n,
    ).SerializeToString()
    return list(codec.decode_get_message_response(body, "t", codec.Partition(1, "127.0.0.1", 8123, "t", 0)).messages)


def load_revision(rev: str) -> ModuleType:
    """``tubemq/spark/schema.py`` as of ``rev``, importable next to the current one."""
    text = subprocess.run(["git", "show", f"{rev}:src/tubemq/spark/schema.py"], cwd=REPO, check=True,
                          capture_output=True, text=True).stdout
    text = text.replace("from ..", "from tubemq.").replace("from .", "from tubemq.spark.")
    path = Path(tempfile.mkdtemp()) / f"schema_{rev}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(f"schema_{rev}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(module: ModuleType, schema: Any, batch: list[Any], batches: int = 20, rows: int = 10_000) -> tuple[float, Any]:
    """ns per message of extend + flush over ``batches`` Arrow batches of ``rows`` rows, fed in chunks
    of ``batch`` (the last chunk of a batch cut to fit, as the read task does)."""
    try:
        builder = module.ArrowBuilder(schema, None)
    except TypeError:  # revisions before column subsets: (schema, include_attributes, zone)
        builder = module.ArrowBuilder(schema, False, None)
    t0 = time.perf_counter()
    out = None
    for _ in range(batches):
        while len(builder) < rows:
            builder.extend(batch[: rows - len(builder)])
        out = builder.flush("t", 1, 0)
    return (time.perf_counter() - t0) / (batches * rows) * 1e9, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--against", default=None, help="git revision whose ArrowBuilder runs alternately")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--chunk", type=int, default=2000, help="messages per getMessage answer (default 2000)")
    ap.add_argument("--schema", default=None,
                    help='a read schema naming a subset of the columns, e.g. "value BINARY" (default: the fixed one)')
    args = ap.parse_args()
    from pyspark.sql.types import StructType

    import tubemq.spark.schema as current
    from tubemq.spark.source import TubeMQDataSource

    spark_schema = TubeMQDataSource({"tubemq.master": "127.0.0.1:1", "subscribe": "t"}).schema()
    if isinstance(spark_schema, str):
        spark_schema = StructType.fromDDL(spark_schema)
    if args.schema:  # "name TYPE, ..." of the source's columns, typed as the source types them
        types = {f.name: f.dataType.simpleString() for f in current.read_schema(True).fields}
        names = [item.split()[0] for item in args.schema.split(",")]
        spark_schema = current.struct_of([(n, types[n.lower()]) for n in names])
        current.check_read_schema(spark_schema, False)
    schema = current.arrow_schema_for(spark_schema)
    batch = messages(args.chunk)
    modules = {"working tree": current}
    if args.against:
        modules[args.against] = load_revision(args.against)
    results: dict[str, list[float]] = {name: [] for name in modules}
    names = list(modules)
    for r in range(args.rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            results[name].append(run(modules[name], schema, batch)[0])
    if len(names) == 2:
        a, b = (run(modules[n], schema, batch, 1)[1] for n in names)
        assert a.equals(b), "the two builders produce different batches"
    load = os.getloadavg()[0]
    for name, values in results.items():
        values.sort()
        print(f"{name:>14}: extend + flush {values[0]:6.0f} ns/message min, {values[len(values) // 2]:6.0f} median "
              f"({args.rounds} rounds, load average {load:.1f})")


if __name__ == "__main__":
    sys.exit(main())
