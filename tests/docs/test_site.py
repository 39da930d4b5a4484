"""The docs site builds without a warning, and its generated pages match the code they come from."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .blocks import REPO


def test_generated_pages_are_fresh() -> None:
    """docs/reference/configuration.md and error-codes.md are what tools/generate_docs.py makes now."""
    r = subprocess.run([sys.executable, str(REPO / "tools" / "generate_docs.py"), "--check"],
                       capture_output=True, text=True, timeout=120, cwd=REPO)
    assert r.returncode == 0, r.stderr + "\nrun: python tools/generate_docs.py"


def test_every_option_and_error_class_is_on_the_site() -> None:
    import dataclasses

    from tubemq import errors
    from tubemq.config import ClientConfig, ConsumerConfig, ProducerConfig
    from tubemq.server.config import ServerConfig

    config = (REPO / "docs" / "reference" / "configuration.md").read_text(encoding="utf-8")
    missing = [f"{c.__name__}.{f.name}" for c in (ClientConfig, ProducerConfig, ConsumerConfig, ServerConfig)
               for f in dataclasses.fields(c) if f"| `{f.name}` |" not in config]
    assert not missing, missing
    site = "".join(p.read_text(encoding="utf-8") for p in (REPO / "docs").rglob("*.md"))
    classes = [n for n in errors.__all__ if isinstance(getattr(errors, n), type)
               and issubclass(getattr(errors, n), errors.TubeMQError) and f"`{n}`" not in site]
    assert not classes, f"exception classes no page names: {classes}"


@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None, reason="mkdocs is not installed (the docs extra)")
def test_mkdocs_build_strict(tmp_path: Path) -> None:
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                       capture_output=True, text=True, timeout=600, cwd=REPO,
                       env={**__import__("os").environ, "NO_MKDOCS_2_WARNING": "1"})
    print(f"mkdocs build: {time.monotonic() - t0:.1f} s")
    assert r.returncode == 0, r.stderr[-4000:]
    assert (tmp_path / "site" / "reference" / "api" / "index.html").exists()
    api = (tmp_path / "site" / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    assert "send_async" in api and "EmbeddedCluster" in api and "AdminClient" in api
