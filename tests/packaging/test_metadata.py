"""Release hygiene that a reviewer would otherwise check by eye: one version, honest classifiers, extras
and install hints that agree with pyproject.toml, a CHANGELOG with an Unreleased section, and a publish job
that can only run after every build job passed on a version tag."""

from __future__ import annotations

import re
import tarfile
from pathlib import Path
from typing import Any

import pytest
from _pkgtools import REPO, pyproject

import tubemq
from tubemq._extras import EXTRAS, install_hint

PYPROJECT: dict[str, Any] = pyproject()
PROJECT = PYPROJECT["project"]

pytestmark = pytest.mark.source_tree


def test_the_version_has_one_source() -> None:
    assert "version" not in PROJECT and "version" in PROJECT["dynamic"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "tubemq._version.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+((a|b|rc)\d+)?(\.dev\d+)?", tubemq.__version__)
    literal = re.compile(rf"(?<![\d.]){re.escape(tubemq.__version__)}(?![\d.])")
    for path in [REPO / "setup.py", REPO / "pyproject.toml", *(REPO / "src" / "tubemq").rglob("*.py")]:
        if path.name == "_version.py" and path.parent.name == "tubemq":
            continue
        text = path.read_text(encoding="utf-8")
        assert not [line for line in text.splitlines() if literal.search(line) and "version" in line.lower()], \
            f"{path.relative_to(REPO)} spells the version out: read tubemq._version.__version__"


@pytest.mark.slow
def test_the_sdist_metadata_carries_that_version(sdist: Path) -> None:
    with tarfile.open(sdist) as t:
        member = next(m for m in t.getmembers() if m.name.count("/") == 1 and m.name.endswith("/PKG-INFO"))
        pkg_info = t.extractfile(member).read().decode()  # type: ignore[union-attr]
    assert f"\nVersion: {tubemq.__version__}\n" in pkg_info
    assert sdist.name == f"tubemq-{tubemq.__version__}.tar.gz"  # what the publish job's tag check expects
    assert "Classifier: Typing :: Typed" in pkg_info


def test_classifiers_match_the_supported_pythons_and_platforms() -> None:
    classifiers = set(PROJECT["classifiers"])
    floor = int(re.fullmatch(r">=3\.(\d+)", PROJECT["requires-python"]).group(1))  # type: ignore[union-attr]
    built = {int(m) for m in re.findall(r"cp3(\d+)-\*", PYPROJECT["tool"]["cibuildwheel"]["build"])}
    assert min(built) == floor, "cibuildwheel builds a Python that requires-python excludes, or skips the oldest"
    listed = {int(c.rsplit(".", 1)[1]) for c in classifiers if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)}
    assert listed == built, f"version classifiers {sorted(listed)} != wheels built {sorted(built)}"
    for needed in ("Typing :: Typed", "Operating System :: POSIX :: Linux", "Operating System :: MacOS",
                   "Operating System :: Microsoft :: Windows", "Framework :: Pytest"):
        assert needed in classifiers
    assert [c for c in classifiers if c.startswith("Development Status :: ")]
    assert not [c for c in classifiers if c.startswith("License :: ")], "PEP 639: the license expression says it"
    assert (REPO / "src" / "tubemq" / "py.typed").is_file()


def test_install_hints_agree_with_the_extras() -> None:
    extras = PROJECT["optional-dependencies"]
    for extra, requirements in EXTRAS.items():
        assert sorted(requirements) == sorted(extras[extra]), f"tubemq._extras.EXTRAS[{extra!r}] != pyproject"
        hint = install_hint(extra)
        assert f"pip install 'tubemq[{extra}]'" in hint and f"pip install '.[{extra}]'" in hint
    # no other hint in the package names only the published form
    bare = re.compile(r"pip install ['\"]?tubemq\[")
    offenders = [str(p.relative_to(REPO)) for p in (REPO / "src").rglob("*.py")
                 if p.name != "_extras.py" and bare.search(p.read_text(encoding="utf-8"))]
    assert offenders == [], f"use tubemq._extras.install_hint: {offenders}"


def test_the_pytest_plugin_is_registered() -> None:
    assert PROJECT["entry-points"]["pytest11"] == {"tubemq": "tubemq.pytest_plugin"}


def test_changelog_has_an_unreleased_section() -> None:
    text = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    assert text.startswith("# Changelog") and "keepachangelog.com" in text
    assert re.search(r"^## \[Unreleased\]$", text, re.M)


def test_publish_runs_only_after_every_build_on_a_tag() -> None:
    yaml = pytest.importorskip("yaml", reason="pyyaml (test extra) reads the workflow")
    workflow = yaml.safe_load((REPO / ".github" / "workflows" / "wheels.yml").read_text(encoding="utf-8"))
    jobs = workflow["jobs"]
    publish = jobs["publish"]
    assert set(publish["needs"]) == set(jobs) - {"publish"}, "publish must wait for every build job"
    assert "refs/tags/v" in publish["if"] and "github.event_name == 'push'" in publish["if"]
    assert publish["permissions"] == {"id-token": "write"}  # trusted publishing, nothing else
    assert publish["environment"]["name"] == "pypi"
    checks = " ".join(s.get("run", "") for s in publish["steps"])
    assert "GITHUB_REF_NAME#v" in checks, "the tag must be checked against the built version"
    for job in jobs.values():
        for step in job["steps"]:
            if str(step.get("uses", "")).startswith("pypa/cibuildwheel@"):
                major = int(re.match(r"v(\d+)", step["uses"].split("@")[1]).group(1))  # type: ignore[union-attr]
                assert major >= 3, "cibuildwheel before 3 ignores test-sources"


def _names(requirements: list[Any]) -> set[str]:
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    return {canonicalize_name(Requirement(r).name) for r in requirements if isinstance(r, str)}


USER_EXTRAS = {"spark", "otel", "inlong", "uvloop", "prometheus"}


def test_development_packages_are_dependency_groups_not_extras() -> None:
    extras = PROJECT["optional-dependencies"]
    assert set(extras) == USER_EXTRAS, "extras are for users: development packages go to [dependency-groups]"
    groups = PYPROJECT["dependency-groups"]
    assert {"test", "docs", "dev"} <= set(groups)
    published = _names(PROJECT["dependencies"]) | {n for reqs in extras.values() for n in _names(reqs)}
    development = {n for reqs in groups.values() for n in _names(reqs)} - published
    for needed in ("pytest", "pytest-xdist", "mypy", "cython", "mkdocs", "grpcio-tools", "auditwheel",
                   "opentelemetry-sdk", "ruff"):
        assert needed in development, f"{needed} should be a development package"
    assert not development & published
    # the groups include each other as PEP 735 says
    assert {"include-group": "docs"} in groups["test"] and {"include-group": "test"} in groups["dev"]


def test_protobuf_range_and_its_314_floor_agree_with_the_workflows() -> None:
    from packaging.requirements import Requirement

    reqs = [Requirement(r) for r in PROJECT["dependencies"]]
    assert {r.name for r in reqs} == {"protobuf"}
    by_marker = {str(r.marker): r.specifier for r in reqs}
    old, new = by_marker['python_version < "3.14"'], by_marker['python_version >= "3.14"']
    assert "4.21.6" in old and "4.21.5" not in old and "8.0" not in old
    assert not new.contains("4.21.6") and "8.0" not in new
    pinned = ("protobuf>=4.21.6,<8",)
    for name in ("ci.yml", "docs.yml"):
        text = (REPO / ".github" / "workflows" / name).read_text(encoding="utf-8")
        found = re.findall(r"protobuf[<>=!~][^\"' ]*", text)
        assert found and set(found) <= set(pinned), f"{name} pins {found}, pyproject asks for {pinned}"
    matrix = (REPO / ".github" / "workflows" / "protobuf.yml").read_text(encoding="utf-8")
    floor_314 = str(new).split(">=")[1].split(",")[0]
    assert f'{{ protobuf: "{floor_314}", python: "3.14" }}' in matrix
    assert '{ protobuf: "4.21.6", python: "3.10" }' in matrix


def test_ci_installs_the_test_group_with_a_pip_that_reads_it() -> None:
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert 'pip install --upgrade "pip>=25.1"' in ci  # --group needs pip 25.1
    assert "TUBEMQ_REQUIRE_EXTENSIONS=1 python -m pip install . --group test" in ci
    for name in ("ci.yml", "protobuf.yml"):
        text = (REPO / ".github" / "workflows" / name).read_text(encoding="utf-8")
        assert '".[test]"' not in text and "--group test" in text


def test_urls_and_the_docs_site_name_this_project() -> None:
    urls = PROJECT["urls"]
    assert {"Homepage", "Documentation", "Source", "Issues", "Changelog"} <= set(urls)
    mkdocs = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    assert f"site_url: {urls['Documentation']}\n" in mkdocs
    assert urls["Issues"].startswith(urls["Source"]) and urls["Changelog"].endswith("CHANGELOG.md")


def test_the_opentelemetry_instrumentor_is_registered() -> None:
    eps = PROJECT["entry-points"]["opentelemetry_instrumentor"]
    assert eps == {"tubemq": "tubemq.otel.instrumentor:TubeMQInstrumentor"}


@pytest.mark.slow
def test_the_sdist_requires_no_development_package(sdist: Path) -> None:
    with tarfile.open(sdist) as t:
        member = next(m for m in t.getmembers() if m.name.count("/") == 1 and m.name.endswith("/PKG-INFO"))
        pkg_info = t.extractfile(member).read().decode()  # type: ignore[union-attr]
    requires = re.findall(r"^Requires-Dist: (.+)$", pkg_info, re.M)
    extras = set(re.findall(r"^Provides-Extra: (.+)$", pkg_info, re.M))
    assert extras == USER_EXTRAS
    allowed = _names(PROJECT["dependencies"]) | {n for reqs in PROJECT["optional-dependencies"].values()
                                                  for n in _names(reqs)}
    assert requires and _names(requires) <= allowed, sorted(_names(requires) - allowed)
