"""PEP 562 lazy attributes shared by :mod:`tubemq` and :mod:`tubemq.spark`: importing a package stays
cheap, a public name imports its module on first use and is cached in the package namespace."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def load_lazy(
    package: str,
    table: dict[str, str],
    namespace: dict[str, Any],
    name: str,
    before: Callable[[], None] | None = None,
) -> Any:
    """``table`` maps a public name to its module; a name equal to its module's last part is the module
    itself. ``before`` runs ahead of the import (e.g. a check that an optional dependency is there)."""
    mod = table.get(name)
    if mod is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    if before is not None:
        before()
    module = importlib.import_module(mod)
    value = module if mod.rsplit(".", 1)[-1] == name else getattr(module, name)
    namespace[name] = value
    return value
