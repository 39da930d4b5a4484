#!/usr/bin/env python3
"""Point the code's protocol references into the repository: "PROTOCOL.md §x" -> "docs/PROTOCOL.md §x".

Only comments and string literals (docstrings) of Python/Cython files change, found with ``tokenize``,
plus plain text in README.md; code is never touched. Idempotent: a reference that already reads
``docs/PROTOCOL.md`` is left alone, so the script can be re-run after every merge. Section numbers are
kept; ``tests/test_docs_refs.py`` checks that each one is a heading of docs/PROTOCOL.md.

Usage: ``python scripts/fix_protocol_refs.py [--check] [paths...]`` (default: src tests bench examples
README.md). ``--check`` changes nothing and exits 1 when something would change.
"""

from __future__ import annotations

import argparse
import io
import re
import sys
import tokenize
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_PATHS = ["src", "tests", "bench", "examples", "README.md"]
SUFFIXES = {".py", ".pyx", ".pxd", ".pyi"}
#: a bare PROTOCOL.md: not already behind a path ("docs/", "protocol/") or part of a longer word
BARE = re.compile(r"(?<![\w/.-])PROTOCOL\.md")
TARGET = "docs/PROTOCOL.md"
SKIP = {"test_docs_refs.py", "fix_protocol_refs.py"}


def _rewrite_text(text: str) -> str:
    return BARE.sub(TARGET, text)


def rewrite_source(source: str) -> str:
    """The source with BARE rewritten inside COMMENT and STRING tokens only."""
    lines = source.splitlines(keepends=True)
    edits: list[tuple[int, int, int, int, str]] = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in (tokenize.COMMENT, tokenize.STRING) and BARE.search(tok.string):
            edits.append((*tok.start, *tok.end, _rewrite_text(tok.string)))
    # apply from the end so earlier positions stay valid
    for (srow, scol, erow, ecol, new) in reversed(edits):
        head = lines[srow - 1][:scol]
        tail = lines[erow - 1][ecol:]
        lines[srow - 1 : erow] = [head + new + tail]
    return "".join(lines)


def fix_file(path: Path, check: bool) -> bool:
    """Rewrite one file; True when it changed (or would change, with ``check``)."""
    source = path.read_text(encoding="utf-8")
    if not BARE.search(source):
        return False
    if path.suffix in SUFFIXES:
        try:
            new = rewrite_source(source)
        except (tokenize.TokenError, SyntaxError, IndentationError) as exc:
            print(f"{path}: cannot tokenize ({exc}); left unchanged", file=sys.stderr)
            return False
    else:
        new = _rewrite_text(source)
    if new == source:
        return False
    if not check:
        path.write_text(new, encoding="utf-8")
    return True


def iter_files(paths: list[str]) -> list[Path]:
    files: list[Path] = []
    for p in paths:
        path = (REPO / p) if not Path(p).is_absolute() else Path(p)
        if path.is_dir():
            files += [f for f in sorted(path.rglob("*")) if f.suffix in SUFFIXES and f.name not in SKIP
                      and "_pb2" not in f.name and "data" not in f.relative_to(path).parts[:1]]
        elif path.is_file():
            files.append(path)
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if something would change")
    parser.add_argument("paths", nargs="*", default=DEFAULT_PATHS)
    args = parser.parse_args(argv)
    changed = [f for f in iter_files(args.paths) if fix_file(f, args.check)]
    for f in changed:
        print(f"{'would rewrite' if args.check else 'rewrote'} {f.relative_to(REPO) if f.is_relative_to(REPO) else f}")
    return 1 if (args.check and changed) else 0


if __name__ == "__main__":
    sys.exit(main())
