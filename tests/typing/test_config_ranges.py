"""Every int option's range stands next to its field; every option checks it, and every bool option its type."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from tubemq.config import ClientConfig, ConsumerConfig, ProducerConfig
from tubemq.errors import ConfigError

BASE: dict[type, dict[str, Any]] = {
    ClientConfig: {"master": "127.0.0.1:8715"},
    ProducerConfig: {"master": "127.0.0.1:8715"},
    ConsumerConfig: {"master": "127.0.0.1:8715", "group": "g", "topics": ["t"]},
}


def _fields(kind: str) -> list[tuple[type, dataclasses.Field[Any]]]:
    """(class, field) of each option of ``kind``, named by the class that declares it."""
    common = {f.name for f in dataclasses.fields(ClientConfig)}
    out = []
    for cls in BASE:
        for f in dataclasses.fields(cls):
            if cls is not ClientConfig and f.name in common:
                continue
            if ("range" in f.metadata) if kind == "range" else f.type == "bool":
                out.append((cls, f))
    return out


RANGED = _fields("range")
BOOLS = _fields("bool")


def test_the_tables_cover_the_options() -> None:
    names = {f.name for _, f in RANGED}
    assert {"rpc_timeout_ms", "max_pending", "fetch_concurrency", "close_timeout_ms"} <= names
    assert len(RANGED) == 27
    assert {f.name for _, f in BOOLS} == {"tls", "tls_verify", "confirm_in_local", "verify_checksum",
                                          "client_filter", "select_big"}


@pytest.mark.parametrize(("cls", "f"), RANGED, ids=[f"{c.__name__}.{f.name}" for c, f in RANGED])
def test_an_int_option_takes_its_range_and_refuses_beyond_it(cls: type, f: dataclasses.Field[Any]) -> None:
    lo, hi = f.metadata["range"]
    assert lo <= f.default <= hi
    for ok in (lo, hi):
        assert getattr(cls(**BASE[cls], **{f.name: ok}), f.name) == ok
    for bad in (lo - 1, hi + 1, True, "5"):
        with pytest.raises(ConfigError) as err:
            cls(**BASE[cls], **{f.name: bad})
        assert err.value.field == f.name


@pytest.mark.parametrize(("cls", "f"), BOOLS, ids=[f"{c.__name__}.{f.name}" for c, f in BOOLS])
def test_a_bool_option_refuses_other_types(cls: type, f: dataclasses.Field[Any]) -> None:
    with pytest.raises(ConfigError, match="must be a bool") as err:
        cls(**BASE[cls], **{f.name: 1})
    assert err.value.field == f.name
