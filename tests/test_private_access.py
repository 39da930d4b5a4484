"""No driver or facade reads or writes another module's private state (DESIGN.md "Layers").

Why: a driver that reaches into an engine's ``_fields`` is a second engine in disguise: a fix to the
engine then misses that route. So in the files below every ``x._name`` must have ``x`` be ``self`` or
``cls``, or ``_name`` be a private name this same file defines (an attribute it assigns on ``self``, a
``__slots__`` entry, a method, a module-level name): state of its own classes. The check is static
(``ast`` for ``.py``, the same rule on the code lines of a ``.pyx``); the allow-list is empty.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import tubemq

#: The checkout's sources (an installed wheel has no .pyx to read), else the imported package.
_SOURCES = Path(__file__).resolve().parents[1] / "src" / "tubemq"
PACKAGE_DIR = _SOURCES if (_SOURCES / "__init__.py").exists() else Path(tubemq.__file__).resolve().parent

#: The files held to the rule (paths under src/tubemq): every driver and facade of each client (all of
#: ``_bridge/`` and ``sync/``, so a new file there is held to it too) and the public entry modules.
CHECKED = sorted(
    str(p.relative_to(PACKAGE_DIR))
    for pattern in ("_bridge/*.py", "_bridge/*.pyx", "sync/*.py")
    for p in PACKAGE_DIR.glob(pattern)
) + ["__init__.py", "aio.py"]

#: ``"file:line x._name"`` entries that may stay. Empty: nothing may be added here.
ALLOWED: set[str] = set()

_OWNERS = {"self", "cls"}


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def own_private_names(tree: ast.Module) -> set[str]:
    """Private names the module itself defines: ``self._x = ...``, ``__slots__`` entries, methods,
    classes, functions and module-level assignments. (A name only declared in a class body, as a
    ``Protocol`` declares another module's attribute, is not one.)"""
    names: set[str] = set()
    top = {id(n) for n in tree.body}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for t in ast.walk(target):
                    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id in _OWNERS:
                        names.add(t.attr)
                    elif isinstance(t, ast.Name) and id(node) in top:
                        names.add(t.id)
            if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__slots__"
                                                     for t in node.targets)):
                for const in ast.walk(node.value):
                    if isinstance(const, ast.Constant) and isinstance(const.value, str):
                        names.add(const.value)
    return {n for n in names if _is_private(n)}


def python_violations(source: str, label: str) -> list[str]:
    tree = ast.parse(source, label)
    own = own_private_names(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not _is_private(node.attr) or node.attr in own:
            continue
        base = node.value
        if isinstance(base, ast.Name) and base.id in _OWNERS:
            continue
        found.append(f"{label}:{node.lineno} {ast.unparse(node)}")
    return found


_PYX_ATTR = re.compile(r"(?<![\w.])([A-Za-z_][\w.]*?|\))\.(_[A-Za-z]\w*)")
_PYX_DEF = re.compile(r"^\s*(?:cdef|cpdef|def|class)\s+(?:class\s+)?(?:[\w.\[\], ]+\s+)?(_\w+)\s*[(:]", re.M)
_PYX_SELF_ASSIGN = re.compile(r"self\.(_\w+)\s*=")
_PYX_STRING = re.compile(r"(\"\"\"|''')(?:.|\n)*?\1|\"[^\"\n]*\"|'[^'\n]*'")


def cython_violations(source: str, label: str) -> list[str]:
    """The same rule on a ``.pyx`` (strings and comments left out)."""
    text = _PYX_STRING.sub(lambda m: "\n" * m.group(0).count("\n"), source)
    own = set(_PYX_DEF.findall(text)) | set(_PYX_SELF_ASSIGN.findall(text))
    own |= {m.group(1) for m in re.finditer(r"^\s*(?:cdef\s+\w[\w ]*\s+)?(_\w+)\s*=", text, re.M)}
    found = []
    for lineno, line in enumerate(text.split("\n"), 1):
        code = line.split("#", 1)[0]
        if re.match(r"\s*(from|import|cimport)\s", code):
            continue  # an import names a module, it reads no object's state
        for m in _PYX_ATTR.finditer(code):
            base, attr = m.group(1), m.group(2)
            if base.split(".")[0] in _OWNERS and "." not in base or attr in own or not _is_private(attr):
                continue
            found.append(f"{label}:{lineno} {base}.{attr}")
    return found


def violations(path: Path, label: str) -> list[str]:
    source = path.read_text(encoding="utf-8")
    if path.suffix == ".pyx":
        return cython_violations(source, label)
    return python_violations(source, label)


def test_checked_list_holds_the_bridge_and_facades() -> None:
    for rel in ("_bridge/portal.py", "_bridge/listener.py", "_bridge/producer.py", "_bridge/_plain.pyx",
                "sync/producer.py", "sync/consumer.py", "sync/bound.py"):
        assert rel in CHECKED, rel


@pytest.mark.parametrize("rel", CHECKED)
def test_no_private_attribute_of_another_module(rel: str) -> None:
    path = PACKAGE_DIR / rel
    assert path.exists(), f"{rel} is listed in CHECKED but does not exist"
    bad = [v for v in violations(path, rel) if v not in ALLOWED]
    assert not bad, "reads or writes of another module's private attributes:\n" + "\n".join(bad)


# ---- the checker itself: it finds what it is there to find ----------------------------------------------


def test_checker_flags_foreign_private_state_and_spares_its_own() -> None:
    source = (
        "class A:\n"
        "    __slots__ = ('_mine',)\n"
        "    def __init__(self, other):\n"
        "        self._mine = 1\n"
        "        self._other = other\n"
        "    def _helper(self):\n"
        "        return other_a._mine\n"           # a private name of this module's own class: allowed
        "    def f(self, core, buf):\n"
        "        core._ext += 1\n"                 # foreign write
        "        n = buf._used\n"                  # foreign read
        "        self._other._lock.acquire()\n"    # foreign through an attribute of self
        "        return n, self.__class__, core.__dict__\n"
    )
    found = python_violations(source, "x.py")
    assert found == ["x.py:9 core._ext", "x.py:10 buf._used", "x.py:11 self._other._lock"], found
    declared = "class Client(Protocol):\n    _hook: int\n\ndef attach(client):\n    client._hook = 1\n"
    assert python_violations(declared, "y.py") == ["y.py:5 client._hook"]


def test_checker_reads_cython_code_lines_only() -> None:
    source = (
        "cdef class S:\n"
        "    cdef object _own\n"
        "    def __init__(self, core):\n"
        "        self._own = core\n"
        "        x = core._ext_lock  # foreign\n"
        "        y = '''a._b in a string'''\n"
        "        # z = q._r in a comment\n"
        "        return self._own, other._own\n"
    )
    found = cython_violations(source, "x.pyx")
    assert found == ["x.pyx:5 core._ext_lock"], found
