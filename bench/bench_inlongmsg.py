"""InLongMsg decode/build throughput: Cython vs the pure-Python twin (results: bench/RESULTS.md, "InLongMsg").

Run: ``python -m pytest bench/bench_inlongmsg.py --benchmark-enable --benchmark-columns=min,median,ops``

Every container holds 100 records of 100 B (log-like text, one attribute string), as v1 raw, v1 snappy
and v4 (one uncompressed binary message). "decode" is ``decode()`` plus fetching every attr's body list:
``decode()`` already creates every body object, which is what the Java iterator of the issue's figure
does in ``next()`` (parse + iterate); "build" is 100 ``add()`` calls plus ``build()``.
``extra_info`` of each benchmark holds records/s and MB/s (container bytes) at the median.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

from tubemq.codec import _inlong_v4, _inlongmsg_py, inlongmsg

NO_EXT = os.environ.get("TUBEMQ_NO_EXTENSIONS", "") not in ("", "0")
IMPLS = ["cython", "python"]
RECORDS = 100
RECORD_SIZE = 100
ATTR = "m=0&groupId=bench_group&streamId=bench_stream&dt=1700000000000&iname=bench"
KINDS = ["v1-raw", "v1-snappy", "v4"]


def _impl(name: str) -> ModuleType:
    if name == "python":
        return _inlongmsg_py
    if NO_EXT:
        pytest.skip("TUBEMQ_NO_EXTENSIONS=1")
    from tubemq.codec import _inlongmsg

    return _inlongmsg


def _bodies() -> list[bytes]:
    rnd = random.Random(7)
    words = [b"user", b"click", b"view", b"order", b"inlong", b"tube", b"event", b"ok", b"2024-01-01 12:00:00",
             b"region=sh", b"42", b"GET", b"/api/v1/items"]
    out = []
    for _ in range(RECORDS):
        line = b""
        while len(line) < RECORD_SIZE:
            line += rnd.choice(words) + b"|"
        out.append(line[:RECORD_SIZE])
    return out


BODIES = _bodies()


def _build(kind: str) -> bytes:
    if kind == "v4":
        b = inlongmsg.InLongMsgBuilder(4, compress=False)
        b.add_binary(inlongmsg.binary_message(BODIES, "m=0&iname=bench", group_id=1, stream_id=2,
                                              data_time=1700000000))
        return b.build()
    b = inlongmsg.InLongMsgBuilder(1, compress=kind == "v1-snappy", capacity=1 << 20)
    for body in BODIES:
        b.add(ATTR, body)
    return b.build(1700000000000)


def _rates(benchmark: Any, nbytes: int) -> None:
    median = benchmark.stats.stats.median
    benchmark.extra_info["records_per_s"] = round(RECORDS / median)
    benchmark.extra_info["MB_per_s"] = round(nbytes / median / 1e6, 1)


@pytest.fixture
def use_impl(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], ModuleType]:
    def select(name: str) -> ModuleType:
        impl = _impl(name)
        monkeypatch.setattr(inlongmsg, "_impl", impl)
        return impl

    return select


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", IMPLS)
def test_decode(benchmark: Any, use_impl: Callable[[str], ModuleType], name: str, kind: str) -> None:
    benchmark.group = f"decode {kind}: 100 x 100 B"
    use_impl(name)
    data = _build(kind)
    decode = inlongmsg.decode

    def run() -> int:
        m = decode(data)  # materialises every body (a bytes object each), as Java's iterator does
        return sum([len(m.bodies(attr)) for attr in m.attrs])

    assert benchmark(run) == RECORDS
    _rates(benchmark, len(data))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", IMPLS)
def test_build(benchmark: Any, use_impl: Callable[[str], ModuleType], name: str, kind: str) -> None:
    benchmark.group = f"build {kind}: 100 x 100 B"
    use_impl(name)
    compress = kind == "v1-snappy"
    bin_msg = inlongmsg.binary_message(BODIES, "m=0&iname=bench", data_time=1700000000)

    def run() -> bytes:
        if kind == "v4":  # the caller packs the binary message; the container wraps it
            b4 = inlongmsg.InLongMsgBuilder(4, compress=False)
            b4.add_binary(bin_msg)
            return b4.build()
        b = inlongmsg.InLongMsgBuilder(1, compress=compress, capacity=1 << 20)
        add = b.add
        for body in BODIES:
            add(ATTR, body)
        return b.build(1700000000000)

    out = benchmark(run)
    assert len(inlongmsg.decode(out)) == RECORDS
    _rates(benchmark, len(out))


def _v4_worst_case() -> bytes:
    """Issue 22 item 3: 20,000 messages with private attributes (4 distinct texts) and 1,000 common keys
    (a common text over the 512-byte cache limit): 249,812 bytes, 22.7 s (Cython) / 48 s (twin) before."""
    common = "&".join(f"k{i}=v{i}" for i in range(1000))
    b = inlongmsg.InLongMsgBuilder(4, compress=False)
    b.add_binary(inlongmsg.binary_message([b"x"] * 20000, common, group_id=1, stream_id=2, data_time=1700000000,
                                          private_attrs=[f"p={i % 4}" for i in range(20000)]))
    return b.build()


@pytest.mark.parametrize("name", IMPLS)
def test_decode_v4_private_attrs_worst_case(benchmark: Any, use_impl: Callable[[str], ModuleType], name: str) -> None:
    benchmark.group = "decode v4 worst case: 20,000 x private attrs, 1,000 common keys (249,812 B)"
    use_impl(name)
    data = _v4_worst_case()
    caches = (_inlong_v4._V4_KEYS, _inlong_v4._V4_PRIVATE_KEYS, _inlong_v4._SPREADS)

    def run() -> int:
        for cache in caches:  # every round a first sight of the container (as a consumer sees it)
            cache.clear()
        return len(inlongmsg.decode(data))

    assert benchmark(run) == 20000
    benchmark.extra_info["MB_per_s"] = round(len(data) / benchmark.stats.stats.median / 1e6, 1)
