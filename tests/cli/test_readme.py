"""README.md stays true: its Python snippets run against an embedded server, its configuration reference
names every option, and the test command it documents is the one .ci/run runs."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .helpers import REPO, cli_env

README = REPO / "README.md"
BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def _blocks() -> list[str]:
    return BLOCK.findall(README.read_text(encoding="utf-8"))


def _runnable() -> list[tuple[int, str]]:
    # Spark snippets need Java and write to /data: the Spark examples are run by tests/test_examples.py.
    return [(i, b) for i, b in enumerate(_blocks()) if "pyspark" not in b and "spark." not in b and "@pytest.fixture" not in b]


@pytest.fixture(scope="module")
def readme_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from tubemq.server import EmbeddedCluster

    with EmbeddedCluster(data_dir=tmp_path_factory.mktemp("readme"), balance_period_ms=200) as c:
        c.create_topic("orders", partitions=3)
        yield c


def _run_python(code: str, cwd: Path, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout,
                          cwd=cwd, env=cli_env())


def test_readme_has_the_snippets_we_expect() -> None:
    assert len(_runnable()) >= 8
    assert any("@pytest.fixture" in b for b in _blocks())


@pytest.mark.parametrize("index", [i for i, _ in _runnable()])
def test_readme_snippet_runs(index: int, readme_cluster: Any, tmp_path: Path) -> None:
    code = dict(_runnable())[index]
    # the snippets use the `tubemq serve` default address; point them at this test's server and let
    # consumers heartbeat quickly so that their partitions arrive in a second rather than in 13 s
    target = f"tubemq://{readme_cluster.master_address}?heartbeat_period_ms=500"
    code = code.replace('"127.0.0.1:8715"', repr(target))
    r = _run_python(code, tmp_path)
    assert r.returncode == 0, f"README snippet #{index} failed:\n{code}\n--- stderr:\n{r.stderr[-3000:]}"


def test_readme_pytest_fixture_snippet(tmp_path: Path) -> None:
    block = next(b for b in _blocks() if "@pytest.fixture" in b)
    (tmp_path / "test_from_readme.py").write_text(block, encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                       capture_output=True, text=True, timeout=180, cwd=tmp_path, env=cli_env())
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "1 passed" in r.stdout


def test_configuration_reference_names_every_option() -> None:
    from tubemq.config import ClientConfig, ProducerConfig
    from tubemq.consumer.config import ConsumerConfig
    from tubemq.server.config import ServerConfig

    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Configuration reference"): text.index("## Error handling")]
    missing = [
        f"{cls.__name__}.{f.name}"
        for cls in (ClientConfig, ProducerConfig, ConsumerConfig, ServerConfig)
        for f in dataclasses.fields(cls)
        if f"| `{f.name}` |" not in section
    ]
    assert not missing, f"README configuration reference lacks: {missing}"


def test_test_command_matches_ci() -> None:
    text = README.read_text(encoding="utf-8")
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert 'pip install -e ".[test]"\npython -m pytest -q' in text
    assert "python -m pytest -q" in ci
    assert "\ntubemq demo\n" in text
