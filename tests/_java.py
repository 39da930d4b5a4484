"""Is there a Java runtime Spark can use? One check for every test that starts Spark.

PySpark 4 needs Java 17 or newer. ``java`` is looked up the way Spark's launcher does: ``$JAVA_HOME/bin/java``
(``java.exe`` on Windows) first, then ``PATH``. The version comes from ``java -version``, which prints
``openjdk version "17.0.15" ...`` or, for Java 8 and older, ``java version "1.8.0_402"`` (on stderr).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from functools import cache

MIN_JAVA = 17

_VERSION = re.compile(r'version "(\d+)(?:\.(\d+))?[^"]*"')


def find_java() -> str | None:
    """The java executable Spark would start, or None."""
    exe = "java.exe" if sys.platform == "win32" else "java"
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        path = os.path.join(java_home, "bin", exe)
        if os.path.isfile(path):
            return path
    return shutil.which("java")


def parse_java_major(version_output: str) -> int | None:
    """The major version in ``java -version`` output (``1.8`` -> 8), or None when it is not there."""
    m = _VERSION.search(version_output)
    if not m:
        return None
    major = int(m.group(1))
    if major == 1 and m.group(2):
        major = int(m.group(2))
    return major


@cache
def java_missing(*, need_pyspark: bool = True) -> str | None:
    """Why Spark cannot run here (the skip reason), or None when it can."""
    java = find_java()
    if java is None:
        return f"Java is not installed (Spark needs Java {MIN_JAVA}+ in JAVA_HOME or on PATH)"
    try:
        out = subprocess.run([java, "-version"], capture_output=True, timeout=30, check=True, text=True)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"Java at {java} does not run: {exc}"
    major = parse_java_major(out.stderr + out.stdout)
    if major is None:
        return f"cannot tell the version of Java at {java} from `java -version`: {out.stderr.strip()[:200]!r}"
    if major < MIN_JAVA:
        return f"Java at {java} is version {major}; Spark needs Java {MIN_JAVA}+"
    if need_pyspark:
        try:
            import pyspark  # noqa: F401
        except ImportError:
            return "pyspark is not installed"
    return None
