#!/usr/bin/env python3
"""Write the generated parts of ``src/tubemq/errors.py`` from ``tools/errcodes.txt``.

One table names every TubeMQ error code, its ``ErrorCode`` member and the exception class it maps to;
this script turns it into the ``ErrorCode`` enum, the ``ServerError`` subclasses and the code->class
table (asyncpg's ``tools/generate_exceptions.py`` works the same way). ``--check`` exits 1 when the
module is out of date (tests/codec/test_errors_table.py runs it).
"""

from __future__ import annotations

import argparse
import pathlib
import sys
from typing import NamedTuple

ROOT = pathlib.Path(__file__).resolve().parents[1]
TABLE = ROOT / "tools" / "errcodes.txt"
TARGET = ROOT / "src" / "tubemq" / "errors.py"
BEGIN = "# ---- BEGIN GENERATED {} (tools/generate_errors.py from tools/errcodes.txt; do not edit)"
END = "# ---- END GENERATED {}"


class ErrClass(NamedTuple):
    name: str
    base: str
    default: str
    retryable: bool
    doc: str


class Code(NamedTuple):
    code: int
    name: str
    origin: str
    cls: str
    meaning: str


def read_table(path: pathlib.Path = TABLE) -> tuple[list[ErrClass], list[Code]]:
    classes: list[ErrClass] = []
    codes: list[Code] = []
    section = ""
    for lineno, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            section = line
            continue
        cells = [c.strip() for c in line.split("|")]
        if section == "[classes]" and len(cells) == 5:
            classes.append(ErrClass(cells[0], cells[1], cells[2], cells[3] == "yes", cells[4]))
        elif section == "[codes]" and len(cells) == 5:
            codes.append(Code(int(cells[0]), cells[1], cells[2], cells[3], cells[4]))
        else:
            raise SystemExit(f"{path}:{lineno}: cannot read {raw!r}")
    names = {c.name for c in codes}
    known = {"ServerError", "ClientError"} | {c.name for c in classes}
    for c in classes:
        if c.default not in names or c.base not in known:
            raise SystemExit(f"{path}: class {c.name}: unknown default code or base")
    for code in codes:
        if code.cls != "-" and code.cls not in known:
            raise SystemExit(f"{path}: code {code.code}: unknown class {code.cls}")
    return classes, codes


def render_codes(codes: list[Code]) -> str:
    out = [
        "class ErrorCode(enum.IntEnum):",
        '    """TErrCodeConstants.java (docs/PROTOCOL.md §6.1): every code a TubeMQ client or server uses."""',
        "",
    ]
    for c in codes:
        out.append(f"    {c.name} = {c.code}  # {c.origin}: {c.meaning}")
    return "\n".join(out)


def render_classes(classes: list[ErrClass], codes: list[Code]) -> str:
    out: list[str] = []
    for c in classes:
        keywords = f"code=ErrorCode.{c.default}" + (", retryable=True" if c.retryable else "")
        out += ["", "", f"class {c.name}({c.base}, {keywords}):", f'    """{c.doc}"""']
    out += ["", "", "#: code -> exception class (codes absent here give a plain ServerError).",
            "_BY_CODE: dict[int, type[ServerError]] = {"]
    out += [f"    ErrorCode.{c.name}: {c.cls}," for c in codes if c.cls != "-"]
    out.append("}")
    return "\n".join(out).lstrip("\n")


def splice(text: str, tag: str, body: str) -> str:
    begin, end = BEGIN.format(tag), END.format(tag)
    head, sep, rest = text.partition(begin + "\n")
    old, sep2, tail = rest.partition(end)
    if not sep or not sep2:
        raise SystemExit(f"{TARGET}: markers for {tag!r} not found")
    return f"{head}{begin}\n{body}\n{end}{tail}"


def generate(text: str) -> str:
    classes, codes = read_table()
    text = splice(text, "error codes", render_codes(codes))
    return splice(text, "error classes", render_classes(classes, codes))


def write_or_check(target: pathlib.Path, wanted: str, current: str, check: bool) -> int:
    """Write ``wanted`` when it differs, or with ``check`` only say so (exit status 1). Shared by tools/."""
    if wanted == current:
        return 0
    if check:
        print(f"{target} is out of date: run python tools/{pathlib.Path(sys.argv[0]).name}", file=sys.stderr)
        return 1
    target.write_text(wanted, encoding="utf-8")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if errors.py is out of date")
    args = parser.parse_args(argv)
    current = TARGET.read_text(encoding="utf-8")
    return write_or_check(TARGET, generate(current), current, args.check)


if __name__ == "__main__":
    sys.exit(main())
