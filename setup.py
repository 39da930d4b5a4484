"""Only the C extension lives here; everything else is in pyproject.toml.

With Cython installed the ``.pyx`` is cythonized; without it (an sdist installed on a machine
without Cython) the shipped ``.c`` is compiled. ``TUBEMQ_NO_EXTENSIONS=1`` skips the extension.
"""

import os

from setuptools import Extension, setup

PYX = "src/tubemq/_codec.pyx"
C_FILE = "src/tubemq/_codec.c"
INLONG_PYX = "src/tubemq/_inlongmsg.pyx"
INLONG_C = "src/tubemq/_inlongmsg.c"


def extensions():
    if os.environ.get("TUBEMQ_NO_EXTENSIONS", "") not in ("", "0"):
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:
        cythonize = None
    if cythonize is not None and os.path.exists(PYX):
        return cythonize(
            [Extension("tubemq._codec", [PYX]), Extension("tubemq._inlongmsg", [INLONG_PYX])],
            compiler_directives={"language_level": "3", "boundscheck": False, "wraparound": False},
        )
    if os.path.exists(C_FILE):
        return [Extension("tubemq._codec", [C_FILE])] + (
            [Extension("tubemq._inlongmsg", [INLONG_C])] if os.path.exists(INLONG_C) else []
        )
    return []


setup(ext_modules=extensions())
