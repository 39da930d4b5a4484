"""Only the C extensions live here; everything else is in pyproject.toml.

With Cython installed the ``.pyx`` files are cythonized; without it (an sdist installed on a machine
without Cython) the shipped ``.c`` files are compiled. Either way the C helpers in ``src/tubemq/codec/_c/*.h``
are included by the generated C as ``"_c/<name>.h"`` (found next to the ``.c``); they are listed as
dependencies so that editing one rebuilds the extension.

The extensions are optional, as in aiohttp/multidict/yarl: when one cannot be built (no C compiler,
missing Python headers) the install goes on with the pure-Python twin and prints ONE warning naming
what failed. ``TUBEMQ_NO_EXTENSIONS=1`` skips the extensions altogether; ``TUBEMQ_REQUIRE_EXTENSIONS=1``
(set by CI and cibuildwheel) turns a failed build back into an error.

Release builds (not ``build_ext --debug``, not ``TUBEMQ_DEBUG_BUILD=1``) are built without debug
information and stripped on Linux and macOS: the codec's ``.so`` is 0.4 MB instead of 2.6 MB.
"""

import glob
import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import CCompilerError, CompileError, ExecError, LinkError, PlatformError

#: The compiled modules: ``tubemq.<name>`` built from ``src/tubemq/<name as a path>.pyx`` (or the shipped
#: ``.c``); ``_bridge._plain`` and ``producer._steps``
#: cimport ``codec.compiled`` (the blocking send's compiled route).
EXTENSION_MODULES = ["codec.compiled", "codec._inlongmsg", "_bridge._plain", "producer._steps"]

#: The hand-written C the generated modules include (shipped in the sdist by MANIFEST.in).
C_HEADERS = sorted(glob.glob("src/tubemq/codec/_c/*.h"))

#: What a missing or broken compiler raises (distutils and setuptools names of the same errors).
BUILD_ERRORS = (CCompilerError, CompileError, ExecError, LinkError, PlatformError, OSError, ValueError)


def _flag(name: str) -> bool:
    return os.environ.get(name, "") not in ("", "0")


def _path(module: str) -> str:
    return module.replace(".", "/")


def extensions() -> list:
    if _flag("TUBEMQ_NO_EXTENSIONS"):
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:
        cythonize = None
    pyx = [f"src/tubemq/{_path(m)}.pyx" for m in EXTENSION_MODULES]
    if cythonize is not None and all(os.path.exists(p) for p in pyx):
        return cythonize(
            [Extension(f"tubemq.{m}", [p], depends=C_HEADERS) for m, p in zip(EXTENSION_MODULES, pyx, strict=True)],
            compiler_directives={"language_level": "3", "boundscheck": False, "wraparound": False},
            include_path=["src"],
        )
    return [
        Extension(f"tubemq.{m}", [f"src/tubemq/{_path(m)}.c"], depends=C_HEADERS)
        for m in EXTENSION_MODULES
        if os.path.exists(f"src/tubemq/{_path(m)}.c")
    ]


class OptionalBuildExt(build_ext):
    """build_ext that falls back to the pure-Python modules instead of failing the install."""

    def initialize_options(self) -> None:
        super().initialize_options()
        self.failed: list[str] = []
        self.failed_names: set[str] = set()

    def run(self) -> None:
        try:
            super().run()
        except BUILD_ERRORS as exc:  # e.g. no compiler found at all (raised before any extension)
            self._failed("all extensions", exc)
        if self.failed:
            self._warn()

    def build_extension(self, ext: Extension) -> None:
        if not self.debug and not _flag("TUBEMQ_DEBUG_BUILD") and sys.platform != "win32":
            ext.extra_compile_args = [*ext.extra_compile_args, "-g0"]
            strip = "-Wl,-x" if sys.platform == "darwin" else "-Wl,-s"
            ext.extra_link_args = [*ext.extra_link_args, strip]
        try:
            super().build_extension(ext)
        except BUILD_ERRORS as exc:
            self.failed_names.add(ext.name)
            self._failed(ext.name, exc)

    def _built(self) -> list:
        return [e for e in self.extensions if e.name not in self.failed_names]

    def copy_extensions_to_source(self) -> None:  # --inplace / editable: only what was built
        all_ext, self.extensions = self.extensions, self._built()
        try:
            super().copy_extensions_to_source()
        finally:
            self.extensions = all_ext

    def get_outputs(self) -> list:
        all_ext, self.extensions = self.extensions, self._built()
        try:
            return super().get_outputs()
        finally:
            self.extensions = all_ext

    def _failed(self, what: str, exc: BaseException) -> None:
        if _flag("TUBEMQ_REQUIRE_EXTENSIONS"):
            raise exc
        self.failed.append(f"{what}: {type(exc).__name__}: {exc}")

    def _warn(self) -> None:
        lines = [
            "*" * 78,
            "WARNING: tubemq's C extensions could not be built; the pure-Python codec is used instead",
            "(same behaviour, several times slower). What failed:",
            *(f"  {f}" for f in self.failed),
            "To build them, install a C compiler and the Python headers, then reinstall.",
            "Set TUBEMQ_NO_EXTENSIONS=1 to skip them without this warning, or",
            "TUBEMQ_REQUIRE_EXTENSIONS=1 to make this an error.",
            "*" * 78,
        ]
        sys.stderr.write("\n".join(lines) + "\n")


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})
