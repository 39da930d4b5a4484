"""README.md stays true: its Python snippets, run verbatim against `tubemq serve`, print what they promise;
its configuration reference names every option; the test command it documents is the one .ci/run runs."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from .helpers import REPO, cli_env

README = REPO / "README.md"
BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def _blocks() -> list[str]:
    return BLOCK.findall(README.read_text(encoding="utf-8"))


def _runnable() -> list[tuple[int, str]]:
    # Spark snippets need Java and write to /data: the Spark examples are run by tests/test_examples.py.
    return [(i, b) for i, b in enumerate(_blocks()) if "pyspark" not in b and "spark." not in b and "@pytest.fixture" not in b]


#: What each runnable snippet prints when run verbatim, in README order, against `tubemq serve` with the
#: quick start's topic: (a text that identifies the snippet, regexes its stdout must match).
EXPECTED: list[tuple[str, list[str]]] = [
    ('iter_timeout_ms=5000) as consumer:     # stop', [r"(?m)^\S+ \d+ b'\{\"id\": 1\}'$"]),
    ("rpc_timeout_ms=5000", [r"(?m)^\S+ \S+ \d+$"]),
    ("for _ in range(10):", [r"(?m)^orders \d+ \d+ "]),
    ("tubemq.aio.Producer", [r"(?m)^100 stored$", r"(?m)^\d+ b'"]),
    ("consumer.subscribe(on_message)", [r"(?m)^got b'"]),
    ("tubemq.BoundConsumer", [r"(?m)^\d+ \d+ b'"]),
    ("bound_offsets=offsets", [r"(?m)^[01] \d+ b'"]),
    ("InLongMsgBuilder(version=1", [r"(?m)^1 \d+ \('groupId=shop&streamId=orders&dt=1700000000000',\)$",
                                    r"(?m)^1700000000000 b'\{\"order\": 2\}'$"]),
    ("brokers=3) as cluster", [r"(?m)^\['127\.0\.0\.1:\d+', '127\.0\.0\.1:\d+', '127\.0\.0\.1:\d+'\]$"]),
    ("MessageTooLargeError", [r"(?m)^create the topic first: 4\d\d ", r"(?m)^too big: "]),
    ("stats_callback=report", [r'"127\.0\.0\.1:8123"']),
]

#: The ports of `tubemq serve` with its defaults: master, broker, admin.
SERVE_PORTS = (8715, 8123, 8080)


def _busy(port: int) -> bool:
    import socket

    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """`tubemq serve --data-dir DIR` and `tubemq topic create orders`, as in the README: (cwd, master).

    On its default ports when they are free, so the snippets run byte for byte; when another program
    holds one of them, on free ports, and the snippets then get the master's port changed, nothing else.
    """
    from tubemq.cli.common import EXIT_PORT_IN_USE, _wait_listening, start_on_free_ports

    work = tmp_path_factory.mktemp("readme")

    def spawn(ports: Sequence[int]) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-m", "tubemq", "serve", "--data-dir", str(work / "tubemq-data"),
             "--master-port", str(ports[0]), "--broker-port", str(ports[1]), "--admin-port", str(ports[2])],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=cli_env(), cwd=work)

    ports: Sequence[int] = SERVE_PORTS
    proc = spawn(ports) if not any(_busy(p) for p in SERVE_PORTS) else None
    if proc is None or not _wait_listening(proc, ports, 60) and proc.wait(10) == EXIT_PORT_IN_USE:
        proc, ports = start_on_free_ports(spawn, 3, 60)  # a default port is taken (now or meanwhile)
    try:
        if proc.poll() is not None:
            pytest.fail(f"tubemq serve did not start: {proc.stderr.read().decode()[-2000:] if proc.stderr else ''}")
        create = ["topic", "create", "orders"]
        if tuple(ports) != SERVE_PORTS:
            create += ["--admin-url", f"http://127.0.0.1:{ports[2]}/webapi.htm"]
        r = subprocess.run([sys.executable, "-m", "tubemq", *create], capture_output=True, timeout=60,
                           env=cli_env(), cwd=work)
        assert r.returncode == 0, r.stderr
        yield work, f"127.0.0.1:{ports[0]}"
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def _run_python(code: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout,
                          cwd=cwd, env=cli_env())


def test_readme_has_the_snippets_we_expect() -> None:
    assert len(_runnable()) >= 8
    assert any("@pytest.fixture" in b for b in _blocks())
    # every runnable snippet has its expected output listed, in README order
    order = [next(i for i, (marker, _) in enumerate(EXPECTED) if marker in b) for _, b in _runnable()]
    assert order == list(range(len(EXPECTED))), order


def test_readme_snippets_verbatim_print_what_they_promise(served: tuple[Path, str]) -> None:
    """Each snippet exactly as printed (address and timeouts included), in README order, as a reader runs
    them one after the other against `tubemq serve`; its output must show the messages, not just exit 0.

    The consumer snippets stop after 3 - 10 idle seconds, so they pass only if a new consumer group gets
    its partitions in about a second (the embedded master balancing a new group at once)."""
    cwd, master = served
    problems = []
    for (_, code), (marker, patterns) in zip(_runnable(), EXPECTED, strict=True):
        assert marker in code
        if master != "127.0.0.1:8715":  # the default ports were taken: the port changes, nothing else
            code = code.replace('"127.0.0.1:8715"', f'"{master}"')
            patterns = [p.replace("8123", "[0-9]+") for p in patterns]
        r = _run_python(code, cwd)
        if r.returncode != 0:
            problems.append(f"snippet with {marker!r} failed ({r.returncode}):\n{r.stderr[-1500:]}")
            continue
        missing = [p for p in patterns if not re.search(p, r.stdout)]
        if missing:
            problems.append(f"snippet with {marker!r}: output lacks {missing}; stdout:\n{r.stdout[-800:]}")
    assert not problems, "\n\n".join(problems)


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
