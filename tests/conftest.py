"""Shared test fixtures.

* The run fails when the compiled codec did not load, unless TUBEMQ_NO_EXTENSIONS=1 selects the
  pure-Python twin (aiokafka style): ``TUBEMQ_NO_EXTENSIONS=1 python -m pytest -q tests/...``.
* ``cluster``: a fresh embedded TubeMQ cluster (master + broker) on 127.0.0.1 with short balance
  periods, in a temporary data directory.
* ``cert``: a self-signed certificate for 127.0.0.1 (``(crt, key)`` paths), made once per worker.
* Parallel workers (pytest-xdist, ``-n 4 --dist loadgroup`` in pyproject): every test uses its own
  ports (0 = the OS picks) and its own tmp_path; tests that must share one worker form a scheduling
  group here (``SERIAL_GROUPS``).
Shared helpers (wait_for, fast timers, produce, platform guards) live in tests/_support.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _support import FAST_SERVER, embedded_cluster
from _support.tls import self_signed_cert

from tubemq import codec

NO_EXT = os.environ.get("TUBEMQ_NO_EXTENSIONS", "") not in ("", "0")
#: A checkout or an unpacked sdist: src/, tools/ and README.md lie beside tests/. The cibuildwheel test run
#: copies only tests/ and pyproject.toml, so tests marked ``source_tree`` are skipped there.
SOURCE_TREE = (Path(__file__).resolve().parents[1] / "src" / "tubemq").is_dir()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "source_tree: reads files of a source checkout (tools/, README.md, src/); skipped without one"
    )


def _skip_source_tree_tests(items: list[pytest.Item]) -> None:
    """Tests marked ``source_tree`` are skipped where there is no source checkout."""
    if SOURCE_TREE:
        return
    skip = pytest.mark.skip(reason="needs a source checkout (src/, tools/, README.md); this run has tests/ only")
    for item in items:
        if item.get_closest_marker("source_tree") is not None:
            item.add_marker(skip)


def pytest_sessionstart(session: pytest.Session) -> None:
    if not NO_EXT and codec.implementation != "cython":
        raise pytest.UsageError(
            "tubemq.codec.compiled (the Cython extension) did not load; build it with `pip install -e .` "
            "or run with TUBEMQ_NO_EXTENSIONS=1 to test the pure-Python twin only"
        )
    if NO_EXT and codec.implementation != "python":
        raise pytest.UsageError(f"TUBEMQ_NO_EXTENSIONS=1 but tubemq.codec runs {codec.implementation!r}")


__all__ = ["FAST_SERVER", "NO_EXT"]  # FAST_SERVER kept for older imports (tests/_support has it)

TESTS = Path(__file__).resolve().parent

#: Tests that run on one worker, one after the other (a scheduling group), and why: the Spark tests share
#: one JVM per worker (session fixtures), so they go to one worker instead of starting a JVM on each (a
#: JVM's start is most of a minute of CPU on 2 cores); the Spark examples run in one child process with a
#: JVM of its own (a module fixture), on another worker. Keys are node ids relative to tests/ ("dir/",
#: "file.py", or "file.py::test_name_prefix").
SERIAL_GROUPS: dict[str, str] = {
    "spark/": "spark",
    "test_examples.py::test_spark": "spark-examples",
    "docs/test_shell_recipes.py::test_fresh_recipe_runs_verbatim[docs/guide/spark.md": "spark-examples",
}
#: Long tests (tens of seconds to minutes each on a loaded 2-core machine: a JVM, a C compile, several
#: server processes, a collection of the whole suite) that carry the ``slow`` mark, so that
#: ``-m "not slow"`` is the quick tier (docs/guide/test-suite.md); the README's command runs them all. Keys
#: as in ``SERIAL_GROUPS``; a test may also carry ``@pytest.mark.slow`` itself.
SLOW: tuple[str, ...] = ("spark/", "test_examples.py::test_spark", "packaging/", "cluster/",
                         "reliability/test_codec_fuzz.py", "reliability/test_kill_and_churn.py",
                         "test_platform_guards.py::test_every_test_module_collects")
#: Files whose tests start first (the longest set-ups and groups), so they do not end the run alone.
FIRST: tuple[str, ...] = ("spark/", "test_examples.py", "packaging/", "reliability/test_codec_fuzz.py",
                          "test_platform_guards.py", "cluster/", "cli/test_readme.py", "typing/")


def _rel(nodeid: str) -> str:
    return nodeid[len("tests/"):] if nodeid.startswith("tests/") else nodeid


def serial_group(nodeid: str) -> str | None:
    """The scheduling group of a test (``SERIAL_GROUPS``), None when it may run anywhere."""
    rel = _rel(nodeid)
    return next((group for prefix, group in SERIAL_GROUPS.items() if rel.startswith(prefix)), None)


#: pytest-timeout limit of the grouped (JVM) tests that set none of their own: one test runs a Spark job
#: of minutes on a loaded 2-core machine (the default, 300 s, is for a hang anywhere else).
GROUP_TIMEOUT_S = 900


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Long files first (stable: the order inside a file is kept); every worker collects the same order.
    Grouped tests get ``GROUP_TIMEOUT_S`` unless they carry a timeout mark, ``SLOW`` ones the ``slow``
    mark; ``source_tree`` tests are skipped without a source checkout."""
    _skip_source_tree_tests(items)
    for item in items:
        if serial_group(item.nodeid) and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(GROUP_TIMEOUT_S))
        if _rel(item.nodeid).startswith(SLOW):
            item.add_marker(pytest.mark.slow)

    def rank(item: pytest.Item) -> int:
        rel = _rel(item.nodeid)
        return next((i for i, prefix in enumerate(FIRST) if rel.startswith(prefix)), len(FIRST))

    items.sort(key=rank)


try:  # pytest-xdist is in the test extra; without it the suite runs in one process (`-p no:xdist` too)
    from xdist.scheduler import LoadScopeScheduling
except ImportError:  # pragma: no cover
    LoadScopeScheduling = None


if LoadScopeScheduling is not None:

    class GroupScheduling(LoadScopeScheduling):  # type: ignore[misc, valid-type]
        """``--dist loadgroup`` by ``SERIAL_GROUPS``: each group is one unit of work, every other test its
        own (as ``--dist load``). Done here because xdist's own ``xdist_group`` marks do not reach the
        scheduler with pytest 9 (xdist renames ``item._nodeid``, which pytest 9 no longer reads)."""

        def _split_scope(self, nodeid: str) -> str:
            return serial_group(nodeid) or nodeid


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if LoadScopeScheduling is not None and config.getvalue("dist") == "loadgroup":
        return GroupScheduling(config, log)
    return None


@pytest.fixture
def cluster(tmp_path: Any) -> Iterator[Any]:
    with embedded_cluster(tmp_path / "tubemq-data") as c:
        yield c


@pytest.fixture(scope="session")
def cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """A self-signed certificate for 127.0.0.1 (``(crt, key)`` paths), made once per worker: tests only read it."""
    return self_signed_cert(tmp_path_factory.mktemp("cert"))
