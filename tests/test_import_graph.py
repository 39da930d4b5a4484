"""The import graph of ``tubemq`` points one way: no cycle between modules, no import that climbs a layer.

The graph is read statically (``ast`` for ``.py``; the ``import`` lines of ``.pyx`` files and the ``.pxi``
files they ``include``), with every import wherever it stands: module level, inside a function (the
usual way to hide a wrong-way dependency), under ``TYPE_CHECKING``, and the lazy tables (``_LAZY``) that
import a module by name on first use. Generated protobuf modules (``*_pb2``) are leaves and left out.

Layers, lowest first (DESIGN.md "Layers"): base (errors, version, metrics, wire constants) < codec
(the codecs, their facade, InLongMsg, and ``tubemq.types``, the data types' one home) < protocol < net
< engines (master session, producer, consumer, config) | server (siblings: neither imports the other)
< bridge (``tubemq._bridge``: all thread crossing) < facades (``tubemq.sync``: the blocking classes)
< public API (``tubemq``, ``tubemq.aio``) < top (spark, cli). A module may import its own layer or any
below it.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from pathlib import Path

import pytest

import tubemq

#: The checkout's sources (an installed wheel has no .pyx to read), else the imported package.
_SOURCES = Path(__file__).resolve().parents[1] / "src" / "tubemq"
PACKAGE_DIR = _SOURCES if (_SOURCES / "__init__.py").exists() else Path(tubemq.__file__).resolve().parent

#: (rank, layer, module prefixes); the longest matching prefix names a module's layer.
LAYERS: list[tuple[int, str, tuple[str, ...]]] = [
    (0, "base", ("tubemq.errors", "tubemq._tasks", "tubemq.serializers", "tubemq._options", "tubemq._version", "tubemq._endpoints", "tubemq._imports", "tubemq.metrics",
                 "tubemq.protocol.constants", "tubemq.protocol.wire_fields")),
    # tubemq.types is the one home of the data types the codec and the clients build (DESIGN.md), so it
    # sits with the codec, below every client that returns them
    (1, "codec", ("tubemq.codec.compiled", "tubemq.codec.python", "tubemq.codec", "tubemq.codec._text", "tubemq.codec._protocols", "tubemq.codec._twin",
                  "tubemq.types",
                  "tubemq.inlongmsg", "tubemq.codec._inlongmsg", "tubemq.codec._inlongmsg_py", "tubemq.codec._inlong_v4")),
    (2, "protocol", ("tubemq.protocol",)),
    (3, "net", ("tubemq.net",)),
    (4, "client", ("tubemq.client", "tubemq.producer", "tubemq.consumer", "tubemq.admin", "tubemq.config")),
    (4, "server", ("tubemq.server",)),
    (5, "bridge", ("tubemq._bridge",)),
    (6, "facades", ("tubemq.sync",)),
    (7, "public", ("tubemq", "tubemq.aio", "tubemq.otel")),
    (8, "top", ("tubemq.spark", "tubemq.cli", "tubemq.__main__", "tubemq.pytest_plugin", "tubemq.testing")),
]
#: Layers of one rank that must not import each other.
SIBLINGS = {frozenset({"client", "server"})}

#: Cycles known and being removed; each entry says who removes it. Nothing else may be added here.
ALLOWED_CYCLES: set[frozenset[str]] = set()

#: Imports up the layers known and being removed; each entry says who removes it.
ALLOWED_CLIMBS: set[tuple[str, str]] = set()

Edge = tuple[str, str, int, str]  # (importer, imported, line, kind)
#: Prefix of an imported name that is no module of the package (a typo'd or stale relative import).
MISSING = "missing:"


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def source_files(root: Path) -> dict[str, Path]:
    """Every module of the package at ``root``: ``.py`` and ``.pyx`` (not generated protobuf code)."""
    files = {}
    for path in sorted(root.rglob("*")):
        if path.suffix in (".py", ".pyx") and not path.stem.endswith("_pb2") and "__pycache__" not in path.parts:
            files[module_name(path, root)] = path
    return files


def generated_modules(root: Path) -> set[str]:
    """The generated protobuf modules: importable, not read."""
    return {module_name(p, root) for p in root.rglob("*_pb2.py")}


def resolve(modules: set[str], importer: str, is_package: bool, level: int, module: str | None,
            names: Iterable[str]) -> list[str]:
    """The package's modules a ``from ... import names`` (or ``import module``) statement loads."""
    if level:
        base = importer.split(".") if is_package else importer.split(".")[:-1]
        base = base[: len(base) - (level - 1)]
        target = ".".join(base + ([module] if module else []))
    else:
        target = module or ""
    names = list(names)
    root = importer.split(".")[0]
    found = [f"{target}.{n}" for n in names if f"{target}.{n}" in modules]
    if len(found) < len(names):  # some names are attributes of ``target`` itself
        if target in modules:
            found.append(target)
        elif target == root or target.startswith(root + "."):
            found.append(MISSING + target)  # no such module (a generated *_pb2 counts as present)
    return [m for m in found if m.startswith(MISSING) or m == root or m.startswith(root + ".")]


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for stmt in node.body:
                inside.update(id(n) for n in ast.walk(stmt))
    return inside


def python_edges(modules: set[str], name: str, path: Path) -> list[Edge]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    typing_only = _type_checking_nodes(tree)
    top_level = {id(n) for n in tree.body}
    is_package = path.name == "__init__.py"
    edges: list[Edge] = []
    for node in ast.walk(tree):
        kind = "type-checking" if id(node) in typing_only else ("module" if id(node) in top_level else "nested")
        if isinstance(node, ast.ImportFrom):
            for target in resolve(modules, name, is_package, node.level, node.module, [a.name for a in node.names]):
                edges.append((name, target, node.lineno, kind))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                for target in resolve(modules, name, is_package, 0, alias.name, []):
                    edges.append((name, target, node.lineno, kind))
        elif (isinstance(node, ast.Assign) and id(node) in top_level and isinstance(node.value, ast.Dict)
              and any(isinstance(t, ast.Name) and t.id == "_LAZY" for t in node.targets)):
            for value in node.value.values:  # "tubemq.x" or ("tubemq.x", "Name"): imported by name later
                first = value.elts[0] if isinstance(value, ast.Tuple) and value.elts else value
                if isinstance(first, ast.Constant) and first.value in modules:
                    edges.append((name, first.value, value.lineno, "lazy"))
    return edges


_PYX_IMPORT = re.compile(r"^\s*from\s+(\.*)([\w.]*)\s+import\s+(.*)$")
_PYX_INCLUDE = re.compile(r'^include\s+"([^"]+)"', re.M)


def cython_edges(modules: set[str], name: str, path: Path) -> list[Edge]:
    """The Python-level ``from X import ...`` lines of a ``.pyx`` and of the files it includes."""
    text = path.read_text(encoding="utf-8")
    sources = [(path, text)] + [(path.parent / inc, (path.parent / inc).read_text(encoding="utf-8"))
                                for inc in _PYX_INCLUDE.findall(text) if inc.endswith(".pxi")]
    edges: list[Edge] = []
    for _src, body in sources:
        lines = body.split("\n")
        i = 0
        while i < len(lines):
            m = _PYX_IMPORT.match(lines[i])
            if m and " cimport " not in lines[i]:
                start, names = i, m.group(3)
                if "(" in names:
                    while ")" not in lines[i]:
                        i += 1
                        names += " " + lines[i]
                listed = [n.split(" as ")[0].strip() for n in re.sub(r"[()]|#.*", "", names).split(",")]
                kind = "nested" if lines[start][:1].isspace() else "module"
                for target in resolve(modules, name, False, len(m.group(1)), m.group(2) or None,
                                      [n for n in listed if n]):
                    edges.append((name, target, start + 1, kind))
            i += 1
    return edges


def import_graph(root: Path) -> list[Edge]:
    files = source_files(root)
    modules = set(files) | generated_modules(root)
    edges: list[Edge] = []
    for name, path in files.items():
        found = cython_edges(modules, name, path) if path.suffix == ".pyx" else python_edges(modules, name, path)
        edges.extend(e for e in found if e[1] != name)
    return edges


def graph_edges(edges: Iterable[Edge]) -> list[Edge]:
    """The edges between modules that exist."""
    return [e for e in edges if not e[1].startswith(MISSING)]


def layer_of(module: str) -> tuple[int, str]:
    best: tuple[int, int, str] | None = None
    for rank, layer, prefixes in LAYERS:
        for p in prefixes:
            if (module == p or (p.count(".") and module.startswith(p + "."))) and (best is None or len(p) > best[0]):
                best = (len(p), rank, layer)
    if best is None:
        raise AssertionError(f"module {module} has no layer: add it to LAYERS in {__file__}")
    return best[1], best[2]


def climbing(edges: Iterable[Edge]) -> list[str]:
    bad = []
    for a, b, line, kind in edges:
        (ra, la), (rb, lb) = layer_of(a), layer_of(b)
        if rb > ra or frozenset({la, lb}) in SIBLINGS:
            bad.append(f"{a}:{line} ({la}) imports {b} ({lb}) [{kind}]")
    return bad


def cycles(edges: Iterable[Edge]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    graph: dict[str, set[str]] = {}
    for a, b, _line, _kind in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        found.append(sorted(comp))
    return found


def _path_of(edges: list[Edge], comp: list[str]) -> list[str]:
    inside = set(comp)
    return [f"{a}:{line} -> {b} [{kind}]" for a, b, line, kind in edges if a in inside and b in inside]


@pytest.fixture(scope="module")
def all_edges() -> list[Edge]:
    found = import_graph(PACKAGE_DIR)
    print(f"{len(found)} imports between {len({e[0] for e in found})} modules of {PACKAGE_DIR}")
    return found


@pytest.fixture(scope="module")
def edges(all_edges: list[Edge]) -> list[Edge]:
    return graph_edges(all_edges)


def test_every_import_names_a_module_that_exists(all_edges: list[Edge]) -> None:
    bad = [f"{a}:{line} imports {b[len(MISSING):]} [{kind}]" for a, b, line, kind in all_edges if b.startswith(MISSING)]
    assert not bad, "imports of modules that do not exist:\n" + "\n".join(bad)


def test_no_import_climbs_a_layer(edges: list[Edge]) -> None:
    bad = climbing(e for e in edges if (e[0], e[1]) not in ALLOWED_CLIMBS)
    assert not bad, "imports that point up the layers (DESIGN.md):\n" + "\n".join(bad)


def test_no_cycle_between_modules(edges: list[Edge]) -> None:
    """Annotation-only (``TYPE_CHECKING``) imports count too: a loop a type checker has to untangle is
    a loop in the design (the shared types want a home below both)."""
    found = cycles(edges)
    unexpected = [c for c in found if frozenset(c) not in ALLOWED_CYCLES]
    assert not unexpected, "import cycles:\n" + "\n\n".join("\n".join(_path_of(edges, c)) for c in unexpected)
    stale = [sorted(c) for c in ALLOWED_CYCLES if list(sorted(c)) not in found]
    if stale:
        print(f"allow-listed cycles now gone (remove their ALLOWED_CYCLES entries): {stale}")


def test_allow_lists_stay_within_the_targets() -> None:
    assert not ALLOWED_CYCLES
    assert len(ALLOWED_CLIMBS) <= 3


def test_layers_are_ranked_as_designed() -> None:
    """DESIGN.md "Layers": the sync facades above the bridge, the bridge above the engines, the public
    asyncio classes above the engines they drive, the server beside the clients, never above them."""
    rank = {layer: r for r, layer, _prefixes in LAYERS}
    assert rank["facades"] > rank["bridge"] > rank["client"] > rank["net"] > rank["protocol"] > rank["codec"]
    assert rank["client"] == rank["server"] and frozenset({"client", "server"}) in SIBLINGS
    assert layer_of("tubemq.sync.producer")[1] == "facades"
    assert layer_of("tubemq._bridge.portal")[1] == "bridge"
    assert layer_of("tubemq.producer.engine")[1] == layer_of("tubemq.consumer.engine")[1] == "client"
    assert layer_of("tubemq.aio")[1] == "public"


def test_every_module_has_a_layer(edges: list[Edge]) -> None:
    for name in source_files(PACKAGE_DIR):
        layer_of(name)


#: Engine packages (and their asyncio clients) that must not import the bridge or the blocking facades
#: above it, in any form (DESIGN.md "Layers": the drivers on callers' threads sit above the engines).
ENGINE_PACKAGES = ("tubemq.producer", "tubemq.consumer")
ABOVE_ENGINES = ("tubemq._bridge", "tubemq.sync")


def test_engines_import_neither_the_bridge_nor_the_facades(edges: list[Edge]) -> None:
    def under(module: str, packages: tuple[str, ...]) -> bool:
        return any(module == p or module.startswith(p + ".") for p in packages)

    bad = [f"{a}:{line} imports {b} [{kind}]" for a, b, line, kind in edges
           if under(a, ENGINE_PACKAGES) and under(b, ABOVE_ENGINES)]
    assert not bad, "an engine imports what drives it from above:\n" + "\n".join(bad)


#: ``tubemq.aio`` and the asyncio classes it exports: asyncio only (DESIGN.md), the thread crossing is the
#: bridge's. Checked in any form of import: module level, in a function, under ``TYPE_CHECKING``.
ASYNCIO_ONLY = ("aio.py", "producer/aio.py", "consumer/aio.py", "consumer/bound/aio.py")
THREAD_MODULES = ("threading", "concurrent.futures", "_thread", "queue")


def thread_imports(source: str, label: str) -> list[str]:
    """The imports of a thread module (or of a name from one) in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source, label)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        for name in names:
            if any(name == m or name.startswith(m + ".") for m in THREAD_MODULES):
                found.append(f"{label}:{node.lineno} imports {name}")
                break
    return found


@pytest.mark.parametrize("rel", ASYNCIO_ONLY)
def test_asyncio_classes_import_no_thread_module(rel: str) -> None:
    path = PACKAGE_DIR / rel
    bad = thread_imports(path.read_text(encoding="utf-8"), rel)
    assert not bad, "tubemq.aio classes are asyncio only (DESIGN.md):\n" + "\n".join(bad)


def test_thread_import_checker_finds_every_form() -> None:
    source = ("import asyncio\nimport threading\nfrom concurrent import futures\n"
              "from concurrent.futures import Future\ndef f():\n    import queue\n"
              "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import _thread\n")
    assert [b.split(" imports ")[0] for b in thread_imports(source, "x.py")] == [
        "x.py:2", "x.py:3", "x.py:4", "x.py:6", "x.py:9"]


# ---- the checker itself: it finds what it is there to find ----------------------------------------------


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "tubemq"
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_checker_sees_function_level_cycles_and_climbs(tmp_path: Path) -> None:
    root = _package(tmp_path, {
        "__init__.py": "_LAZY = {'Producer': 'tubemq.producer.core'}\n",
        "codec/__init__.py": "def inlong():\n    from ..inlongmsg import decode\n    return decode\n",
        "inlongmsg.py": "from . import codec\n",
        "net/__init__.py": "",
        "net/pool.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..producer.core import X\n",
        "producer/__init__.py": "",
        "producer/core.py": "from ..net import pool\nfrom .. import errors\n",
        "errors.py": "",
        "server/__init__.py": "",
        "server/broker/__init__.py": "def f():\n    from tubemq.producer import core\n",
        "codec/compiled.pyx": 'from .python import (\n    A,\n    B,\n)\ninclude "_codec_x.pxi"\n',
        "codec/_codec_x.pxi": "def g():\n    from ..inlongmsg import decode\n",
        "codec/python.py": "",
        "codec/_twin/__init__.py": "",
        "codec/_twin/types.py": "def f():\n    from .inlongmsg import decode\n",
    })
    everything = import_graph(root)
    assert [(a, b) for a, b, _line, _kind in everything if b.startswith(MISSING)] == [
        ("tubemq.codec._twin.types", MISSING + "tubemq.codec._twin.inlongmsg")]
    found = graph_edges(everything)
    kinds = {(a, b): kind for a, b, _line, kind in found}
    assert kinds[("tubemq", "tubemq.producer.core")] == "lazy"
    assert kinds[("tubemq.codec", "tubemq.inlongmsg")] == "nested"
    assert kinds[("tubemq.net.pool", "tubemq.producer.core")] == "type-checking"
    assert kinds[("tubemq.codec.compiled", "tubemq.codec.python")] == "module"
    assert kinds[("tubemq.codec.compiled", "tubemq.inlongmsg")] == "nested"
    assert sorted(cycles(found)) == [["tubemq.codec", "tubemq.inlongmsg"], ["tubemq.net.pool", "tubemq.producer.core"]]
    bad = climbing(found)
    assert any("tubemq.net.pool:3 (net) imports tubemq.producer.core (client)" in b for b in bad), bad
    assert any("tubemq.server.broker:2 (server) imports tubemq.producer.core (client)" in b for b in bad), bad
    assert not any(b.startswith("tubemq.producer.core") for b in bad), bad
