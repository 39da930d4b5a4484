"""A griffe extension for the API reference (mkdocs.yml loads it): what mkdocstrings cannot see alone.

* Methods made by a wrapper (``poll = blocking(aio.Consumer.poll)``, any ``functools.wraps`` wrapper)
  are plain attributes to a static reader; they become functions with the wrapped method's signature,
  types and docstring (without ``async``: the facade blocks), found through ``__wrapped__`` at run time.
* Names a module exports lazily (a module ``__getattr__``) are documented like imported ones.
* The docstrings' Sphinx roles (``:class:`~tubemq.Consumer```, ``:meth:`poll```...) become
  cross-references resolved in the docstring's scope, so they render as links (a target the site does
  not document renders as code, without a warning).
* Special methods other than the protocols a reader uses (``for``, ``with``, ``len``) stay off the page.
* The literal ``\\|`` that docstrings carry for Markdown tables outside a table becomes ``|``.
"""

from __future__ import annotations

import contextlib
import html
import importlib
import inspect
import re
import sys
from pathlib import Path
from typing import Any

import griffe

SRC = Path(__file__).resolve().parents[1] / "src"

#: ``:class:`target```, ``:py:meth:`title <target>```, with or without ``~``.
ROLE = re.compile(r":(?:py:)?(?P<kind>class|meth|func|attr|exc|data|mod|obj|const|type):`(?P<body>[^`]+)`")


def _objects(obj: griffe.Object) -> Any:
    """``obj`` and everything defined under it (aliases are skipped: their targets are walked)."""
    yield obj
    for member in list(obj.members.values()):
        if not member.is_alias:
            yield from _objects(member)  # type: ignore[arg-type]

#: The special methods a reader uses (``for``, ``with``, ``len``, ``[i]``): listed; the rest
#: (``__init__`` merged into the class, ``__repr__``, ``__slots__``, ...) are not.
PROTOCOL = frozenset({"__init__", "__new__", "__iter__", "__next__", "__aiter__", "__anext__", "__len__", "__getitem__", "__contains__",
                      "__bool__", "__enter__", "__exit__", "__aenter__", "__aexit__", "__call__", "__await__"})


class TubeMQReference(griffe.Extension):
    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        if pkg.name != "tubemq":
            return
        if str(SRC) not in sys.path:
            sys.path.insert(0, str(SRC))
        collection = loader.modules_collection
        for obj in list(_objects(pkg)):
            if obj.is_module and not obj.name.startswith("_"):
                self._export_lazy(obj, collection)  # type: ignore[arg-type]
        for obj in list(_objects(pkg)):
            if obj.is_class:
                self._unwrap_methods(obj, collection)  # type: ignore[arg-type]
        for obj in list(_objects(pkg)):
            if obj.docstring is not None:
                obj.docstring.value = self._links(obj, obj.docstring.value)
            if obj.is_class:
                for name in [n for n in obj.members if n.startswith("__") and n.endswith("__") and n not in PROTOCOL]:
                    del obj.members[name]

    @staticmethod
    def _export_lazy(module: griffe.Module, collection: griffe.ModulesCollection) -> None:
        """The names a module exports through ``__getattr__`` (or as ``Other = Cls``): aliases of their
        definitions, and ``__all__`` as it is at run time (``[..., *_LAZY]`` is opaque to a reader)."""
        try:
            runtime = importlib.import_module(module.path)
        except Exception:  # noqa: BLE001 - a module that does not import keeps its static view
            return
        exports = getattr(runtime, "__all__", None)
        if not isinstance(exports, (list, tuple)):
            return
        names = [str(n) for n in exports]
        module.exports = list(names)
        for name in names:
            member = module.members.get(name)
            if member is not None and (member.is_alias or not member.is_attribute):
                continue
            try:
                value = getattr(runtime, name)
            except Exception:  # noqa: BLE001 - e.g. an optional dependency missing
                continue
            if not (inspect.isclass(value) or inspect.isfunction(value)):
                continue
            path = f"{value.__module__}.{value.__qualname__}"
            if path == f"{module.path}.{name}":
                continue
            try:
                collection[path]
            except (KeyError, griffe.AliasResolutionError):
                continue
            module.set_member(name, griffe.Alias(name, path, parent=module))

    @staticmethod
    def _unwrap_methods(cls: griffe.Class, collection: griffe.ModulesCollection) -> None:
        runtime: Any = None
        for name, member in list(cls.members.items()):
            if member.is_alias or not member.is_attribute or member.docstring is not None:
                continue
            if runtime is None:
                try:
                    runtime = getattr(importlib.import_module(cls.module.path), cls.name)
                except Exception:  # noqa: BLE001 - a module that does not import keeps its static view
                    return
            wrapped = getattr(inspect.getattr_static(runtime, name, None), "__wrapped__", None)
            if wrapped is None:
                continue
            try:
                target = collection[f"{wrapped.__module__}.{wrapped.__qualname__}"]
            except (KeyError, griffe.AliasResolutionError):
                continue
            if not target.is_function:
                continue
            fn = griffe.Function(name, lineno=member.lineno, endlineno=member.endlineno,
                                 parameters=target.parameters, returns=target.returns,
                                 docstring=griffe.Docstring(target.docstring.value) if target.docstring else None)
            fn.labels = set(target.labels) - {"async"}
            cls.set_member(name, fn)
            if fn.docstring is not None:
                fn.docstring.parent = fn

    @staticmethod
    def _target(obj: griffe.Object, written: str) -> str | None:
        """The path ``written`` names from ``obj``'s scope (its class's members first), or None."""
        name = written.strip().removesuffix("()")
        if name.startswith("tubemq."):
            return name
        head, _, rest = name.partition(".")
        scopes = [obj] if obj.is_class or obj.is_module else []
        scopes += [p for p in _parents(obj)]
        for scope in scopes:
            with contextlib.suppress(Exception):
                path = scope.resolve(head)
                return f"{path}.{rest}" if rest else path
        return None

    def _links(self, obj: griffe.Object, text: str) -> str:
        def link(m: re.Match[str]) -> str:
            body = m.group("body")
            if (angled := re.fullmatch(r"(.*?)\s*<([^>]+)>", body)) is not None:
                title, written = angled.group(1), angled.group(2)
            else:
                written = body
                title = body[1:].rsplit(".", 1)[-1] if body.startswith("~") else body
            target = self._target(obj, written.lstrip("~"))
            code = f"<code>{html.escape(title)}</code>"
            if target is None:
                return code
            return f'<autoref identifier="{html.escape(target)}" optional>{code}</autoref>'

        return ROLE.sub(link, text).replace("\\|", "|")


def _parents(obj: griffe.Object) -> list[griffe.Object]:
    out: list[griffe.Object] = []
    p = obj.parent
    while p is not None:
        out.append(p)  # type: ignore[arg-type]
        p = p.parent
    return out
