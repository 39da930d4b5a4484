"""The compiled codec is the build that was tested: made with a Cython release of the pinned range, with the
Message freelist fast path compiled in.

That fast path reads Cython's private freelist names, so src/tubemq/codec/_c/tq_message.h compiles it only for the
Cython releases it knows, and any other release silently builds the slower fallback. pyproject.toml pins
Cython to that range in ``[build-system]``; these tests fail when a build falls back or the pin and the
header's range drift apart.
"""

from __future__ import annotations

import platform
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from .conftest import NO_EXT

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    tomllib = pytest.importorskip("tomli")

pytestmark = pytest.mark.skipif(NO_EXT, reason="TUBEMQ_NO_EXTENSIONS=1: no compiled codec to check")

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def _compiled():  # type: ignore[no-untyped-def]
    from tubemq.codec import compiled as _codec  # an ImportError here is a real failure, not a skip

    return _codec


def _pinned_cython() -> Requirement:
    requires = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["build-system"]["requires"]
    pins = [Requirement(r) for r in requires if Requirement(r).name.lower() == "cython"]
    assert len(pins) == 1, requires
    return pins[0]


def _version(parts: tuple[int, int, int]) -> Version:
    return Version(".".join(map(str, parts)))


def test_built_with_a_pinned_cython() -> None:
    built = _version(_compiled().BUILT_WITH_CYTHON)
    pin = _pinned_cython()
    print(f"built with Cython {built}; pyproject pins {pin}")
    assert pin.specifier.contains(built), f"built with Cython {built}, outside the pin {pin}: rebuild with it"


def test_pin_is_the_range_the_fast_path_knows() -> None:
    first, end = (_version(v) for v in _compiled().MESSAGE_FREELIST_CYTHON_RANGE)
    spec = _pinned_cython().specifier
    assert {str(s) for s in spec} == {f">={first}", f"<{end}"}, (
        f"pyproject pins Cython {spec}, tq_message.h compiles the fast path for [{first}, {end})"
    )


@pytest.mark.skipif(platform.python_implementation() != "CPython" or "free-threading" in sys.version,
                    reason="the fast path exists for the GIL build of CPython only")
def test_message_fast_path_is_compiled_in() -> None:
    codec = _compiled()
    assert codec.MESSAGE_FREELIST_FAST_PATH, (
        f"the Message freelist fast path fell back (built with Cython {codec.BUILT_WITH_CYTHON}, "
        f"fast path known for {codec.MESSAGE_FREELIST_CYTHON_RANGE}): decoding is slower"
    )
    # and the messages it builds are whole: every field set, usable, comparable
    m = codec.decode_message(codec.RawMessage(7, codec.crc32(b"x"), b"x", 0), "t", None, 28)
    assert (m.topic, m.data, m.attributes, m.message_id, m.offset) == ("t", b"x", {}, 7, 28)
