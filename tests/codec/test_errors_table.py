"""errors.py is generated from tools/errcodes.txt and stays in step with it."""

from __future__ import annotations

import importlib.util
import pathlib
import pickle
import sys
from types import ModuleType

import pytest

from tubemq import errors
from tubemq.protocol import constants

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _tool(name: str) -> ModuleType:
    path = ROOT / "tools" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_tool_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.source_tree  # tools/ is not in a wheel
def test_errors_py_is_up_to_date() -> None:
    gen = _tool("generate_errors")
    current = gen.TARGET.read_text(encoding="utf-8")
    assert gen.generate(current) == current, "run python tools/generate_errors.py"


@pytest.mark.source_tree  # tools/ is not in a wheel
def test_table_drives_codes_and_classes() -> None:
    gen = _tool("generate_errors")
    classes, codes = gen.read_table()
    assert [c.code for c in codes] == sorted(c.code for c in codes)
    assert {m.name: m.value for m in errors.ErrorCode} == {c.name: c.code for c in codes}
    for c in codes:
        exc = errors.error_for_code(c.code, "why")
        expected = errors.ServerError if c.cls == "-" else getattr(errors, c.cls)
        assert type(exc) is expected, c
        assert exc.code == c.code and exc.message == "why"
        assert c.name in str(exc)
    for c in classes:
        cls = getattr(errors, c.name)
        assert cls.default_code == errors.ErrorCode[c.default]
        assert cls.retryable is c.retryable
        assert c.name in errors.__all__


@pytest.mark.parametrize("code", [0, 299, 999, -1])
def test_unknown_code_is_a_plain_server_error(code: int) -> None:
    exc = errors.error_for_code(code)
    assert type(exc) is errors.ServerError and "UNKNOWN" in str(exc)


def test_constants_re_export_the_same_enum() -> None:
    assert constants.ErrorCode is errors.ErrorCode
    assert constants.ErrorCode.PARTITION_OCCUPIED == 410


def test_all_lists_every_public_exception() -> None:
    public = {n for n, v in vars(errors).items()
              if isinstance(v, type) and issubclass(v, Exception) and not n.startswith("_")}
    assert public | {"ErrorCode", "error_for_code", "remote_error"} == set(errors.__all__)


@pytest.mark.source_tree  # tools/ is not in a wheel
def test_a_stale_table_is_detected(tmp_path: pathlib.Path) -> None:
    gen = _tool("generate_errors")
    current = gen.TARGET.read_text(encoding="utf-8")
    stale = current.replace("    MOVED = 301", "    MOVED = 302", 1)
    assert stale != current and gen.generate(stale) == current


@pytest.mark.parametrize("exc", [errors.MovedError(message="moved"), errors.ServerError(999, "odd"),
                                 errors.MessageTooLargeError(message="big")])
def test_server_errors_survive_pickling(exc: errors.ServerError) -> None:
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is type(exc)
    assert (back.code, back.message, str(back), back.retryable) == (exc.code, exc.message, str(exc), exc.retryable)
