"""Importing on demand: PEP 562 lazy attributes, and how to install an optional extra that is missing.

Lazy attributes (shared by :mod:`tubemq` and :mod:`tubemq.spark`) keep importing a package cheap: a
public name imports its module on first use and is cached in the package namespace. The install hint is
said so that it works both ways a user can have tubemq: ``pip install 'tubemq[inlong]'`` only works
against a published release; from a source checkout the extra is ``pip install '.[inlong]'``, and
naming the packages themselves always works.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

#: extra -> the requirements it adds (kept in step with pyproject.toml by tests/packaging/test_metadata.py)
EXTRAS: dict[str, tuple[str, ...]] = {
    "inlong": ("cramjam>=2.11",),
    "spark": ("pyspark>=4.2", "pyarrow>=15"),
    "otel": ("opentelemetry-api>=1.30",),
    "prometheus": ("prometheus-client>=0.17",),
    "uvloop": ("uvloop>=0.19; sys_platform != 'win32'",),
}


def install_hint(extra: str) -> str:
    """``pip install <packages> (the '<extra>' extra: ...)`` for an error message."""
    packages = " ".join(f"'{r}'" if any(c in r for c in "<>=") else r for r in EXTRAS[extra])
    return (f"pip install {packages} (the '{extra}' extra: pip install 'tubemq[{extra}]', "
            f"or pip install '.[{extra}]' in a source checkout)")


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
