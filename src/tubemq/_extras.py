"""How to install an optional extra, said so that it works both ways a user can have tubemq.

``pip install 'tubemq[inlong]'`` only works against a published release; from a source checkout the
extra is ``pip install '.[inlong]'``, and naming the packages themselves always works.
"""

from __future__ import annotations

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
