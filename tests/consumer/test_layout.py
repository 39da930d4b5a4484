"""The consumer package stays laid out in one-way layers: no import circle between its modules (type-only
imports included), no import inside a function, no module over ~600 lines, and ``Batch`` defined in
:mod:`tubemq.types`. Read from the source with ``ast``, so a regression fails here and not in review."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "src" / "tubemq" / "consumer"
MAX_LINES = 600


def module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return "tubemq." + ".".join(parts)


def resolve(current: str, is_pkg: bool, node: ast.ImportFrom) -> list[str]:
    """Absolute names an ``ImportFrom`` brings in (``from . import aio`` -> the module ``...aio``)."""
    base = current.split(".") if is_pkg else current.split(".")[:-1]
    if node.level:
        base = base[: len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    return [target] + [f"{target}.{a.name}" for a in node.names]


def graph() -> dict[str, set[str]]:
    files = {module_name(p): p for p in PKG.rglob("*.py")}
    edges: dict[str, set[str]] = {m: set() for m in files}
    for mod, path in files.items():
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                for name in resolve(mod, path.name == "__init__.py", node):
                    if name in files and name != mod and not mod.startswith(name + "."):
                        edges[mod].add(name)  # a package's own __init__ (a parent) is not an edge
    return edges


def test_no_import_circle_between_consumer_modules() -> None:
    edges = graph()
    # packages re-export their children: an __init__ importing its subpackage is the usual shape, and
    # a child importing a sibling never needs the parent __init__; only module -> module edges count
    inits = {m for m in edges if (PKG.parent / m.replace("tubemq.", "", 1).replace(".", "/") / "__init__.py").exists()}
    seen: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        seen[m] = 1
        stack.append(m)
        for n in sorted(edges[m] - inits):
            if seen.get(n) == 1:
                raise AssertionError("import circle: " + " -> ".join(stack[stack.index(n):] + [n]))
            if n not in seen:
                visit(n)
        stack.pop()
        seen[m] = 2

    for m in sorted(set(edges) - inits):
        if m not in seen:
            visit(m)
    assert "tubemq.consumer.bound.core" not in edges["tubemq.consumer.bound.session"]
    assert "tubemq.consumer.core" not in edges["tubemq.consumer.session"]


def test_no_import_inside_a_function_and_no_long_module() -> None:
    for path in sorted(PKG.rglob("*.py")):
        text = path.read_text()
        assert len(text.splitlines()) <= MAX_LINES, f"{path.name}: {len(text.splitlines())} lines"
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inner = [n for n in ast.walk(node) if isinstance(n, (ast.Import, ast.ImportFrom))]
                assert not inner, f"{path.relative_to(PKG)}:{inner[0].lineno}: import inside {node.name}()"


def test_batch_lives_in_types() -> None:
    import tubemq
    import tubemq.consumer
    import tubemq.consumer.fetch
    import tubemq.types

    assert tubemq.types.Batch.__module__ == "tubemq.types"
    assert tubemq.Batch is tubemq.consumer.Batch is tubemq.consumer.fetch.Batch is tubemq.types.Batch
    tree = ast.parse((PKG.parent / "types.py").read_text())
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("consumer")]
