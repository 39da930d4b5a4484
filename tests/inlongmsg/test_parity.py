"""Seeded parity fuzz: the Cython module and the pure-Python twin agree on every input.

Random containers (all buildable versions, raw and snappy, odd attrs and empty bodies) must build to
the same bytes and decode to the same content; randomly damaged copies must either decode to the
same content on both or raise InLongMsgError on both -- never another exception.
"""

from __future__ import annotations

import random
from types import ModuleType
from typing import Any

import pytest

from tubemq import inlongmsg
from tubemq.codec import _inlongmsg_py
from tubemq.errors import InLongMsgError

from .conftest import NO_EXT, impl_module

pytestmark = pytest.mark.skipif(NO_EXT, reason="parity needs the Cython extension")

SEED = 20240613
ROUNDS = 300
ATTR_CHARS = "abcxyz=&0123456789_ é中\x00😀"


def _rand_attr(rnd: random.Random) -> str:
    kind = rnd.random()
    if kind < 0.6:
        return "&".join(f"k{rnd.randrange(5)}={rnd.randrange(1000)}" for _ in range(rnd.randrange(1, 5)))
    return "".join(rnd.choice(ATTR_CHARS) for _ in range(rnd.randrange(0, 20)))


def _rand_body(rnd: random.Random) -> bytes:
    n = rnd.choice((0, 1, 3, 17, 100, rnd.randrange(0, 600)))
    return bytes(rnd.getrandbits(8) for _ in range(n)) if rnd.random() < 0.5 else (b"log line " * 70)[:n]


def _v3_record(rnd: random.Random) -> bytes:
    out = b""
    for _ in range(rnd.randrange(1, 4)):
        msg = _rand_body(rnd) or b"m"
        attr = f"p={rnd.randrange(3)}".encode()
        out += len(msg).to_bytes(4, "big") + msg + len(attr).to_bytes(4, "big") + attr
    return out


def _container(rnd: random.Random, impl: ModuleType) -> bytes:
    version = rnd.choice((1, 1, 2, 3, 4))
    compress = rnd.random() < 0.4
    if version == 4:
        n = rnd.randrange(0, 12)
        private = [f"p={rnd.randrange(3)}" for _ in range(n)] if rnd.random() < 0.3 else None
        bodies = [_rand_body(rnd) or b"x" for _ in range(n)] if private else [_rand_body(rnd) for _ in range(n)]
        bin_msg = inlongmsg.binary_message(
            bodies, rnd.choice(("", "m=0&iname=a", "a=1&b=2&c=3")), group_id=rnd.randrange(-3, 70000),
            stream_id=rnd.randrange(70000), data_time=rnd.randrange(1 << 31), ext=rnd.choice((0, 0x4, 0x20)),
            private_attrs=private,
        )
        b = _builder(impl, 4, compress)
        b.add_binary(bin_msg)
        return bytes(b.build())
    b = _builder(impl, version, compress)
    attrs = [_rand_attr(rnd) for _ in range(rnd.randrange(1, 4))]
    for _ in range(rnd.randrange(0, 15)):
        b.add(rnd.choice(attrs), _v3_record(rnd) if version == 3 else _rand_body(rnd))
    return bytes(b.build(rnd.randrange(-(1 << 63), 1 << 63)))


def _builder(impl: ModuleType, version: int, compress: bool) -> Any:
    saved = inlongmsg._impl
    inlongmsg._impl = impl
    try:
        return inlongmsg.InLongMsgBuilder(version, compress)
    finally:
        inlongmsg._impl = saved


def _decoded(impl: ModuleType, data: bytes) -> Any:
    saved = inlongmsg._impl
    inlongmsg._impl = impl
    try:
        m = inlongmsg.decode(data)
    except InLongMsgError as exc:
        return ("error", type(exc).__name__)
    finally:
        inlongmsg._impl = saved
    return (m.version, m.create_time, m.msg_count, m.attr_count, m.is_num_group_id, m.is_support_lf,
            m.attrs, [(a, bytes(b)) for a, b in m])


def _damage(rnd: random.Random, data: bytes) -> bytes:
    buf = bytearray(data)
    kind = rnd.randrange(5)
    if kind == 0 and buf:
        for _ in range(rnd.randrange(1, 4)):
            buf[rnd.randrange(len(buf))] = rnd.getrandbits(8)
    elif kind == 1:
        del buf[rnd.randrange(2, max(3, len(buf) - 2)) :]
        buf += data[:2]  # re-frame so the magic check passes
    elif kind == 2:
        pos = rnd.randrange(2, max(3, len(buf) - 2))
        buf[pos:pos] = bytes(rnd.getrandbits(8) for _ in range(rnd.randrange(1, 6)))
    elif kind == 3 and len(buf) > 20:
        pos = rnd.randrange(2, len(buf) - 6)
        buf[pos : pos + 4] = rnd.getrandbits(32).to_bytes(4, "big")
    else:
        buf = bytearray(bytes(rnd.getrandbits(8) for _ in range(rnd.randrange(0, 40))))
        if rnd.random() < 0.7 and len(buf) >= 2:
            buf[:2] = data[:2]
            buf[-2:] = data[:2]
    return bytes(buf)


def test_fuzz_parity() -> None:
    rnd = random.Random(SEED)
    cy, py = impl_module("cython"), _inlongmsg_py
    decoded_ok = damaged_ok = damaged_err = 0
    for i in range(ROUNDS):
        state = rnd.getstate()
        a = _container(rnd, cy)
        rnd.setstate(state)
        b = _container(rnd, py)
        assert a == b, f"round {i}: builds differ"
        da, db = _decoded(cy, a), _decoded(py, a)
        assert da == db, f"round {i}"
        assert da[0] != "error", f"round {i}: our own container does not decode: {da}"
        decoded_ok += 1
        for _ in range(3):
            bad = _damage(rnd, a)
            ra, rb = _decoded(cy, bad), _decoded(py, bad)
            assert ra == rb, f"round {i}: damaged input {bad.hex()}"
            if ra[0] == "error":
                damaged_err += 1
            else:
                damaged_ok += 1
    assert decoded_ok == ROUNDS
    assert damaged_err > ROUNDS  # most damage is detected


def test_items_and_pairs_parity() -> None:
    rnd = random.Random(SEED + 1)
    cy, py = impl_module("cython"), _inlongmsg_py
    for _ in range(500):
        buf = bytes(rnd.getrandbits(8) if rnd.random() < 0.3 else 0 for _ in range(rnd.randrange(0, 40)))
        for fn in ("split_items", "split_pairs", "snappy_length"):
            outs = []
            for impl in (cy, py):
                try:
                    outs.append(getattr(impl, fn)(buf, 0, len(buf)))
                except InLongMsgError:
                    outs.append("error")
            assert outs[0] == outs[1], (fn, buf.hex())


def test_snappy_decoders_agree() -> None:
    """The compiled decoder, the pure-Python one and cramjam agree on valid and damaged blocks."""
    import cramjam

    rnd = random.Random(SEED + 2)
    cy = impl_module("cython")
    for i in range(400):
        raw = bytes(rnd.choice(b"ab \x00xyz") for _ in range(rnd.randrange(0, 3000)))
        if rnd.random() < 0.3:
            raw = raw * rnd.randrange(1, 20)
        block = bytearray(bytes(cramjam.snappy.compress_raw(raw)))
        damaged = i % 2 == 1
        if damaged and block:
            for _ in range(rnd.randrange(1, 3)):
                block[rnd.randrange(len(block))] = rnd.getrandbits(8)
            if rnd.random() < 0.3:
                del block[rnd.randrange(len(block)) :]
        data = bytes(block)
        results = []
        for fn in (cy.snappy_uncompress, _inlongmsg_py.unsnappy, _inlongmsg_py.snappy_uncompress):
            try:
                results.append(bytes(fn(data, 0, len(data))))
            except InLongMsgError:
                results.append(None)
        assert results[0] == results[1], f"case {i}: {data.hex()}"
        if not damaged:
            assert results[0] == raw
        if results[2] is not None:  # cramjam may reject what is valid-by-format; never the other way
            assert results[0] == results[2], f"case {i}: {data.hex()}"
