"""Every OS leg of CI collects the whole suite: no POSIX-only name is evaluated at import or collection time.

Windows has no ``signal.SIGKILL`` (nor SIGSTOP, SIGPIPE, ...) and no ``/proc``; a test module that names
them at import (a default argument, a module constant, a decorator argument) is a collection error there,
which turns a whole OS leg red. This module keeps it so on Linux:

* the whole suite is collected in a child process where those signals and ``/proc`` are hidden;
* a source check: a module that names ``SIGKILL`` or reads ``/proc`` also has the guard that skips its
  tests (or copes) where they are missing: ``_support.needs_sigkill`` / ``needs_proc_fs`` / ``HAS_PROC_FS``.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent

#: The signals Windows has (CPython's signal module there); every other SIG* name is hidden.
WINDOWS_SIGNALS = {"SIGABRT", "SIGBREAK", "SIGFPE", "SIGILL", "SIGINT", "SIGSEGV", "SIGTERM", "SIG_DFL", "SIG_IGN"}

#: Runs in the child: hide the POSIX-only signals and /proc, then collect everything given in argv.
_SIMULATE = r"""
import builtins, io, os, signal, sys

hidden = [n for n in dir(signal) if n.startswith("SIG") and n not in set(sys.argv[1].split(","))]
for name in hidden:
    delattr(signal, name)


def _guard(fn):
    def wrapper(path, *args, **kwargs):
        p = os.fspath(path) if isinstance(path, (str, bytes, os.PathLike)) else ""
        p = p.decode() if isinstance(p, bytes) else p
        if p == "/proc" or p.startswith("/proc/"):
            raise FileNotFoundError(2, "No such file or directory (simulated: no /proc)", p)
        return fn(path, *args, **kwargs)
    return wrapper


for mod, name in [(os, "stat"), (os, "lstat"), (os, "listdir"), (os, "scandir"), (os, "open"),
                  (builtins, "open"), (io, "open")]:
    setattr(mod, name, _guard(getattr(mod, name)))
assert not os.path.exists("/proc/self") and not hasattr(signal, "SIGKILL")

import pytest

sys.exit(pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-o", "addopts=",
                      *sys.argv[2:]]))
"""


def test_every_test_module_collects_without_sigkill_and_proc() -> None:
    r = subprocess.run(
        [sys.executable, "-c", _SIMULATE, ",".join(sorted(WINDOWS_SIGNALS)), str(TESTS)],
        capture_output=True, text=True, timeout=600, cwd=TESTS.parent,
    )
    tail = r.stdout[-6000:] + r.stderr[-3000:]
    assert r.returncode == 0, f"collection failed with SIGKILL and /proc hidden:\n{tail}"
    assert " error" not in r.stdout.splitlines()[-1], tail
    assert "tests collected" in r.stdout or " collected" in r.stdout, tail


#: What a module that names SIGKILL must also contain (a skip of its tests where there is none).
SIGKILL_GUARDS = ("needs_sigkill", "HAS_SIGKILL", 'hasattr(signal, "SIGKILL")')


def _names_sigkill(tree: ast.AST) -> list[int]:
    return [n.lineno for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and n.attr == "SIGKILL"]


def _reads_proc(tree: ast.AST) -> list[int]:
    return [n.lineno for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.startswith("/proc/")]


def test_posix_only_facilities_are_named_behind_guards() -> None:
    problems = []
    for path in sorted(TESTS.rglob("*.py")):
        rel = path.relative_to(TESTS)
        if rel.parts[0] == "_support" or path == Path(__file__).resolve():
            continue
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source, str(path))
        if _names_sigkill(tree) and not any(g in source for g in SIGKILL_GUARDS):
            problems.append(f"{rel}:{_names_sigkill(tree)[0]}: sends SIGKILL without a platform guard; use "
                            "_support.kill_signal() in a test marked _support.needs_sigkill")
        proc_guarded = "HAS_PROC_FS" in source or "needs_proc_fs" in source or any(
            "skipif" in line and "/proc" in line for line in source.splitlines())
        if _reads_proc(tree) and not proc_guarded:
            problems.append(f"{rel}:{_reads_proc(tree)[0]}: reads /proc without needs_proc_fs or HAS_PROC_FS")
    assert not problems, "\n".join(problems)
