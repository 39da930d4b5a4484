"""The code blocks of README.md and docs/: extracted with the markers written above them.

Markers are HTML comments on the lines right before a fence (invisible on the rendered page):
``<!-- norun: REASON -->`` the block is not run (the reason is required, and counted);
``<!-- expect: REGEX -->`` (repeatable) its stdout must match; ``<!-- pytest -->`` the block is a test
file, run with pytest; ``<!-- fresh -->`` a shell recipe that starts its own server, as a reader on a fresh
machine does: it and the runnable blocks after it on its page are one *session*, run one after the
other in one shell (what the first exports, the later ones see) by tests/docs/test_shell_recipes.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^```(\w+)\s*$")
MARKER = re.compile(r"^<!--\s*(norun|expect|pytest|fresh)\s*(?::\s*(.*?))?\s*-->\s*$")
RUNNABLE = ("python", "bash")


@dataclass
class Block:
    page: str  # path relative to the repository
    line: int  # line of the opening fence (1-based)
    lang: str
    code: str
    norun: str | None = None
    expect: list[str] = field(default_factory=list)
    pytest: bool = False
    fresh: bool = False
    session: bool = False  # a block after a ``fresh`` one on its page: run in that shell session

    @property
    def name(self) -> str:
        return f"{self.page}:{self.line}"


def pages() -> list[Path]:
    """README.md and every Markdown page of the docs site (the generated reference pages have no code)."""
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def blocks(path: Path) -> list[Block]:
    """The python and bash blocks of one page, with their markers."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start = i
        j = i + 1
        while j < len(lines) and lines[j].strip() != "```":
            j += 1
        if m.group(1) in RUNNABLE:
            block = Block(str(path.relative_to(REPO)), start + 1, m.group(1), "\n".join(lines[start + 1:j]) + "\n")
            k = start - 1
            while k >= 0 and (mk := MARKER.match(lines[k].strip())):
                kind, arg = mk.group(1), (mk.group(2) or "").strip()
                if kind == "norun":
                    block.norun = arg
                elif kind == "expect":
                    block.expect.insert(0, arg)
                elif kind == "pytest":
                    block.pytest = True
                else:
                    block.fresh = True
                k -= 1
            block.session = any(b.fresh and not b.norun for b in out) and not block.norun
            out.append(block)
        i = j + 1
    return out


def all_blocks() -> list[Block]:
    return [b for p in pages() for b in blocks(p)]
