"""Print the coverage of src/tubemq: the total and one line per package (tubemq, tubemq.client, ...).

Run after a test run that measured coverage (``.ci/run`` does both); reads the combined data file
(``COVERAGE_FILE`` or ``.coverage``). Files are grouped by their package inside ``tubemq`` whether the
run measured the installed package (site-packages) or the checkout (src/tubemq).
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import PurePath


def package_of(filename: str) -> str | None:
    """``.../tubemq/server/broker/__init__.py`` -> ``tubemq.server``; None outside the package."""
    parts = PurePath(filename).parts
    if "tubemq" not in parts:
        return None
    i = len(parts) - 1 - parts[::-1].index("tubemq")
    return ".".join(parts[i:-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-file", default=None, help="coverage data file (default: COVERAGE_FILE or .coverage)")
    ap.add_argument("--fail-under", type=float, default=0.0, help="exit 2 when the total is below this percentage")
    args = ap.parse_args(argv)

    import coverage

    # data_file=None would mean "no data file": leave it out to get COVERAGE_FILE / .coverage
    cov = coverage.Coverage(**({"data_file": args.data_file} if args.data_file else {}))
    cov.load()
    data = cov.get_data()
    per: dict[str, list[int]] = defaultdict(lambda: [0, 0])  # package: [statements, missed]
    for filename in sorted(data.measured_files()):
        pkg = package_of(filename)
        if pkg is None:
            continue
        try:
            _, statements, _, missing, _ = cov.analysis2(filename)
        except coverage.CoverageException:
            continue  # a file that no longer exists (or is not Python source)
        per[pkg][0] += len(statements)
        per[pkg][1] += len(missing)
    if not per:
        print("coverage: no data for the tubemq package", file=sys.stderr)
        return 1
    width = max(len(p) for p in per)
    total_stmts = sum(s for s, _ in per.values())
    total_missed = sum(m for _, m in per.values())
    print("\ncoverage of tubemq by package (statements, missed, covered):")
    for pkg in sorted(per):
        stmts, missed = per[pkg]
        pct = 100.0 * (stmts - missed) / stmts if stmts else 100.0
        print(f"  {pkg:<{width}}  {stmts:6d}  {missed:6d}  {pct:5.1f}%")
    total = 100.0 * (total_stmts - total_missed) / total_stmts
    print(f"  {'TOTAL':<{width}}  {total_stmts:6d}  {total_missed:6d}  {total:5.1f}%")
    return 2 if total < args.fail_under else 0


if __name__ == "__main__":
    sys.exit(main())
