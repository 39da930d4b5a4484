"""docs/PROTOCOL.md is the document the code's "§x.y" references point into: every cited section must
exist, and the field lines of its message catalogue (§3) must match the .proto files."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest
from _pbcompat import is_repeated, is_required

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "PROTOCOL.md"
FIXER = REPO / "scripts" / "fix_protocol_refs.py"

SECTION_REF = re.compile(r"§\s?(\d+(?:\.\d+)*)")
HEADING = re.compile(r"^#{2,4} (\d+(?:\.\d+)*)\.? ", re.M)
FIELD_LINE = re.compile(r"^`(\w+)`: (1 `.*)$", re.M)


def _headings() -> set[str]:
    return set(HEADING.findall(DOC.read_text(encoding="utf-8")))


def _fixer() -> ModuleType:
    """scripts/fix_protocol_refs.py, which also decides which files hold references."""
    spec = importlib.util.spec_from_file_location("fix_protocol_refs", FIXER)
    assert spec is not None and spec.loader is not None, FIXER
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _code_files() -> list[Path]:
    """The code of src, tests, bench and examples (not tests/data, not the fixer and this test)."""
    fixer = _fixer()
    return [p for p in fixer.iter_files(fixer.DEFAULT_PATHS) if p.suffix in fixer.SUFFIXES]


def _citations() -> dict[str, list[str]]:
    """section -> ["path:line", ...] for every "§x.y" in the code."""
    found: dict[str, list[str]] = {}
    for path in _code_files():
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for sec in SECTION_REF.findall(line):
                found.setdefault(sec, []).append(f"{path.relative_to(REPO)}:{lineno}")
    return found


def test_the_code_cites_sections() -> None:
    """The scan sees the references (guards against a regex that silently matches nothing)."""
    assert len(_citations()) > 30


def test_every_cited_section_exists() -> None:
    headings = _headings()
    missing = {sec: where[:3] for sec, where in _citations().items() if sec not in headings}
    assert not missing, f"sections cited in the code but not headings of {DOC.relative_to(REPO)}: {missing}"


def test_references_name_the_document_in_the_repository(capsys: pytest.CaptureFixture[str]) -> None:
    """"PROTOCOL.md §x" in the code means docs/PROTOCOL.md: the fixer finds nothing left to rewrite."""
    rc = _fixer().main(["--check"])
    assert rc == 0, f"run `python scripts/fix_protocol_refs.py`:\n{capsys.readouterr().out}"


def test_fixer_rewrites_only_comments_and_strings() -> None:
    fixer = _fixer()
    source = (
        '"""Framing (PROTOCOL.md §1.2)."""\n'
        "PROTOCOL_md = 1  # see PROTOCOL.md §2.7\n"
        "x = PROTOCOL_md  # already docs/PROTOCOL.md §3\n"
    )
    once = fixer.rewrite_source(source)
    assert once == (
        '"""Framing (docs/PROTOCOL.md §1.2)."""\n'
        "PROTOCOL_md = 1  # see docs/PROTOCOL.md §2.7\n"
        "x = PROTOCOL_md  # already docs/PROTOCOL.md §3\n"
    )
    assert fixer.rewrite_source(once) == once  # idempotent


def test_section_numbers_are_unique() -> None:
    numbers = HEADING.findall(DOC.read_text(encoding="utf-8"))
    assert len(numbers) == len(set(numbers)), sorted(n for n in numbers if numbers.count(n) > 1)


def _proto_line(name: str) -> str:
    from google.protobuf.descriptor import FieldDescriptor as F

    from tubemq.protocol import broker_pb, master_pb, rpc_pb

    for mod in (rpc_pb, master_pb, broker_pb):
        if hasattr(mod, name):
            desc = getattr(mod, name).DESCRIPTOR
            break
    else:
        raise AssertionError(f"docs/PROTOCOL.md names a message {name} that no .proto defines")
    scalar = {F.TYPE_INT32: "int32", F.TYPE_INT64: "int64", F.TYPE_BOOL: "bool", F.TYPE_STRING: "string",
              F.TYPE_BYTES: "bytes"}
    parts = []
    for f in desc.fields:
        if f.type == F.TYPE_MESSAGE:
            typ = f.message_type.name
        elif f.type == F.TYPE_ENUM:
            typ = f.enum_type.name
        else:
            typ = scalar[f.type]
        label = "rep" if is_repeated(f) else ("**req**" if is_required(f) else "opt")
        parts.append(f"{f.number} `{f.name}` {typ} {label}")
    return "; ".join(parts)


def test_field_lines_match_the_protos() -> None:
    lines = FIELD_LINE.findall(DOC.read_text(encoding="utf-8"))
    assert len(lines) >= 40
    for name, text in lines:
        fields = text.split(" — ")[0]  # a line may end with a note after " — "
        assert fields == _proto_line(name), name


@pytest.mark.parametrize("name", ["RegisterRequestP2M", "SendMessageRequestP2B", "GetMessageResponseB2C"])
def test_field_line_format(name: str) -> None:
    """The generated line for a message has one entry per field, in field-number order."""
    text = _proto_line(name)
    numbers = [int(part.split(" ")[0]) for part in text.split("; ")]
    assert numbers == sorted(numbers) and numbers[0] == 1
