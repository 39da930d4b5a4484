"""``**options`` are typed (TypedDict + Unpack): mypy refuses a misspelt option on all four client
classes, and the TypedDicts name exactly the config fields (one list of options, checked here)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

from tubemq.config import ClientConfig, ConsumerConfig, ConsumerOptions, ProducerConfig, ProducerOptions

SRC = Path(__file__).resolve().parents[2] / "src"

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


def test_mypy_catches_misspelt_options(tmp_path: Path) -> None:
    import mypy  # noqa: F401 - a test dependency: missing = failure, not a skip
    script = tmp_path / "user.py"
    script.write_text(USER_SCRIPT)
    env = dict(os.environ, MYPYPATH=str(SRC))
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache"), "--follow-imports=silent",
         "--ignore-missing-imports", "--no-error-summary", "--hide-error-context", str(script)],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )
    out = proc.stdout
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
