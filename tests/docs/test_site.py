"""The docs site builds without a warning, and its generated pages match the code they come from."""

from __future__ import annotations

import html
import importlib
import importlib.util
import inspect
import os
import re
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


#: The public modules the API reference documents, each with every name of its ``__all__``.
API_MODULES = ("tubemq", "tubemq.aio", "tubemq.admin", "tubemq.server", "tubemq.codec", "tubemq.inlongmsg",
               "tubemq.otel", "tubemq.serializers", "tubemq.spark", "tubemq.types", "tubemq.config", "tubemq.errors",
               "tubemq.metrics")

#: A Sphinx role left as text: ``:class:`X``` on the page instead of a link.
RAW_ROLE = re.compile(r":(?:py:)?(?:class|meth|func|attr|exc|mod|data|obj|const):`")


def public_api() -> list[str]:
    """Every public path: the modules, their ``__all__`` names, the public members of their classes
    (through the class's tubemq bases too, with the dataclass fields)."""
    import dataclasses

    out: list[str] = []
    for path in API_MODULES:
        module = importlib.import_module(path)
        out.append(path)
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.ismodule(obj):
                continue
            out.append(f"{path}.{name}")
            if not (isinstance(obj, type) and obj.__module__.startswith("tubemq")):
                continue
            members = {m for k in obj.__mro__ if k.__module__.startswith("tubemq") for m in vars(k)
                       if not m.startswith("_")}
            if dataclasses.is_dataclass(obj):
                members |= {f.name for f in dataclasses.fields(obj)}
            out += [f"{path}.{name}.{m}" for m in sorted(members)]
    return out


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if importlib.util.find_spec("mkdocs") is None:
        pytest.skip("mkdocs is not installed (the docs extra)")
    out = tmp_path_factory.mktemp("site") / "site"
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                       capture_output=True, text=True, timeout=600, cwd=REPO,
                       env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    print(f"mkdocs build: {time.monotonic() - t0:.1f} s")
    assert r.returncode == 0, r.stderr[-4000:]
    return out


def _text(page: Path) -> str:
    """A built page as a reader sees it: tags off, entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8")))


def test_mkdocs_build_strict(site: Path) -> None:
    api = (site / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    assert "send_async" in api and "EmbeddedCluster" in api and "AdminClient" in api


def test_api_reference_lists_every_public_name(site: Path) -> None:
    """A heading per public name at its public path, none at a private one (``tubemq._twin...``)."""
    api = (site / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    anchors = set(re.findall(r'<h[1-6] id="(tubemq[\w.]*)"', api))
    missing = [name for name in public_api() if name not in anchors]
    assert not missing, f"public names the API reference lacks: {missing}"
    private = sorted(a for a in anchors if re.search(r"\._(?!_)", a))
    assert not private, f"private paths as headings: {private[:20]}"
    # the signatures carry their types, and a type links to its entry
    poll = api[api.index('id="tubemq.Consumer.poll"'):][:3000]
    assert "timeout" in poll and "float" in poll and 'href="#tubemq.' in api
    assert "Facade" not in _text(site / "reference" / "api" / "index.html")


def test_no_raw_role_or_escaped_pipe_on_the_site(site: Path) -> None:
    """Docstring roles render as links (or code), and a ``\\|`` in a table's code span is not printed."""
    problems = []
    for page in sorted(site.rglob("*.html")):
        text = _text(page)
        if roles := RAW_ROLE.findall(text):
            problems.append(f"{page.relative_to(site)}: {len(roles)} raw roles")
        if (n := text.count("\\|")) > 0:
            problems.append(f"{page.relative_to(site)}: {n} literal \\|")
    assert not problems, problems


def test_examples_page_lists_every_example() -> None:
    page = (REPO / "docs" / "guide" / "examples.md").read_text(encoding="utf-8")
    missing = [p.name for p in sorted((REPO / "examples").glob("*.py")) if f"`examples/{p.name}`" not in page]
    assert not missing, f"examples the examples page does not list: {missing}"


def test_repository_paths_are_code_not_text(site: Path) -> None:
    """The site has no link into the source tree, so a path like bench/RESULTS.md is shown as code (there is
    nothing to click that would lead nowhere), never as plain prose."""
    path = re.compile(r"(?<![\w/.-])(?:bench|tests|examples|src|tools|scripts)/[\w./-]*\w")
    found = []
    for page in sorted(site.rglob("*.html")):
        body = page.read_text(encoding="utf-8")
        body = re.sub(r"<(code|pre|script|style)\b.*?</\1>", "", body, flags=re.S)
        body = re.sub(r"<[^>]+>", " ", body)
        found += [f"{page.relative_to(site)}: {m}" for m in path.findall(html.unescape(body))]
    assert not found, found[:20]
