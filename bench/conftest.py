"""pytest-benchmark defaults for bench/: calibrate on warm calls, to rounds of at least 20 us.

pytest-benchmark calibrates a case by timing 1 call, then 10, 100, ... until a round lasts ``min_time``
(default 5 us), starting from the very first call. That call is cold (first-use allocations, caches, branch
history) and takes longer than 5 us even for a function whose warm call costs 200 ns, so calibration stops
at ONE call per round; each round then also times the loop step and two timer reads (~130 ns on the
2-core VM of bench/RESULTS.md), and a 200 ns function reads as 320+ ns. Here calibration runs on warm calls
(``--benchmark-warmup=on``, at most ``--benchmark-warmup-iterations`` calls per calibration step, 1 000
here, and never longer than ``--benchmark-max-time``) to rounds of at least 20 us
(``--benchmark-min-time=0.00002``): a sub-microsecond case gets ~50-100 calls per round and the timer adds
~1-2 ns per call. Each of these three options, when given on the command line (or in PYTEST_ADDOPTS), wins.
"""

from __future__ import annotations

import os

import pytest

# option dest -> (command-line flag, value used when the flag is not given)
_DEFAULTS: dict[str, tuple[str, object]] = {
    "benchmark_warmup": ("--benchmark-warmup", True),
    "benchmark_warmup_iterations": ("--benchmark-warmup-iterations", 1000),
    "benchmark_min_time": ("--benchmark-min-time", "0.00002"),
}


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Set the defaults before pytest-benchmark reads its options (its own hook runs last)."""
    given = [*config.invocation_params.args, *os.environ.get("PYTEST_ADDOPTS", "").split()]
    for dest, (flag, value) in _DEFAULTS.items():
        if not hasattr(config.option, dest):
            continue  # pytest-benchmark not installed / disabled with -p no:benchmark
        if any(a == flag or a.startswith(flag + "=") for a in given):
            continue
        setattr(config.option, dest, value)
