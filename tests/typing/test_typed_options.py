"""``**options`` are typed (TypedDict + Unpack): mypy refuses a misspelt option on all four client
classes, and the TypedDicts name exactly the config fields (one list of options, checked here)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from tubemq.config import ClientConfig, ConsumerConfig, ConsumerOptions, ProducerConfig, ProducerOptions

USER_SCRIPT = '''\
import tubemq
import tubemq.aio

tubemq.Producer("h:1", rpc_timeout_ms=5000, value_serializer="json")
tubemq.Producer("h:1", rpc_timout_ms=5000)
tubemq.Consumer("h:1", group="g", topics=["t"], fetch_concurrency=2)
tubemq.Consumer("h:1", group="g", topics=["t"], fetch_concurency=2)
tubemq.Producer("h:1", retries="3")


async def main() -> None:
    tubemq.aio.Producer("h:1", max_pendin=1)
    tubemq.aio.Consumer("h:1", group="g", topics=["t"], iter_timeout=1)
'''


def test_mypy_catches_misspelt_options(mypy_on: Callable[[str], str]) -> None:
    out = mypy_on(USER_SCRIPT)
    errors = [line for line in out.splitlines() if ": error:" in line]
    lines = sorted({int(e.split(":")[1]) for e in errors})
    assert lines == [5, 7, 8, 12, 13], out
    assert any("rpc_timout_ms" in e for e in errors), out
    assert any("fetch_concurency" in e for e in errors), out


def _fields(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def test_typed_options_match_the_config_fields() -> None:
    assert set(ProducerOptions.__optional_keys__) == \
        _fields(ProducerConfig) - {"master"}
    assert set(ConsumerOptions.__optional_keys__) == \
        _fields(ConsumerConfig) - {"master", "group", "topics", "consume_from"}
    assert _fields(ClientConfig) - {"master"} <= set(ConsumerOptions.__optional_keys__)
