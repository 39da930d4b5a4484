"""README.md stays a short front page that tells the truth: the test command it documents is the one
.ci/run runs, it fits on two screens, and its links point at pages that exist. Its code blocks run with
the documentation's (tests/docs/test_code_blocks.py)."""

from __future__ import annotations

import re

from .helpers import REPO

README = REPO / "README.md"


def test_test_command_matches_ci() -> None:
    text = README.read_text(encoding="utf-8")
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(r"pip install -e \. --group test[^\n]*\npython -m pytest -q\n", text)
    assert "python -m pip install . --group test" in ci and "python -m pytest -q" in ci
    assert "\ntubemq demo\n" in text


def test_readme_is_short() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200, len(lines)


def test_readme_links_exist() -> None:
    text = README.read_text(encoding="utf-8")
    targets = [t.split("#")[0] for t in re.findall(r"\]\(([^)]+)\)", text) if "://" not in t and not t.startswith("#")]
    assert targets
    missing = [t for t in targets if not (REPO / t).exists()]
    assert not missing, missing


def test_no_development_history_in_user_docs() -> None:
    """Benchmark history lives in bench/RESULTS.md; user-facing pages state current facts only."""
    pages = [README, *sorted((REPO / "docs").rglob("*.md"))]
    history = re.compile(r"\b(issue \d+|this round|sitting|two rounds ago)\b", re.I)
    found = [f"{p.relative_to(REPO)}: {m.group(0)}" for p in pages if p.name != "docs/PROTOCOL.md"
             for m in history.finditer(p.read_text(encoding="utf-8"))]
    assert not found, found


def test_docs_state_the_exit_status_of_a_taken_port() -> None:
    """`tubemq serve` on a taken port exits 3 (cli/common.py EXIT_PORT_IN_USE); no page says otherwise."""
    from tubemq.cli.common import EXIT_PORT_IN_USE

    assert EXIT_PORT_IN_USE == 3
    pages = [README, *sorted((REPO / "docs").rglob("*.md"))]
    wrong = [str(p.relative_to(REPO)) for p in pages
             if re.search(r"address already in use[^|]*exits with 1\b", p.read_text(encoding="utf-8"), re.S)]
    assert not wrong, wrong
