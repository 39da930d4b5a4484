"""Library hygiene (issue 14 item 6): a silent logger hierarchy by default, ``Batch`` as a sequence."""

from __future__ import annotations

import collections.abc
import subprocess
import sys
from pathlib import Path

import pytest

from tubemq import codec
from tubemq.consumer import Batch

SRC = Path(__file__).resolve().parents[2] / "src"


def test_unconfigured_program_prints_no_library_warnings() -> None:
    """Without logging configured, Python's last-resort handler printed tubemq warnings on stderr."""
    script = 'import logging, tubemq; logging.getLogger("tubemq.consumer").warning("broker unhealthy")'
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(SRC)}, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    # a program that configures logging still gets the records
    configured = ('import logging, sys; logging.basicConfig(stream=sys.stdout); import tubemq; '
                  'logging.getLogger("tubemq.consumer").warning("broker unhealthy")')
    proc = subprocess.run([sys.executable, "-c", configured], capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(SRC)}, check=False)
    assert "WARNING:tubemq.consumer:broker unhealthy" in proc.stdout, proc.stdout + proc.stderr


def _batch(n: int) -> Batch:
    part = codec.Partition(1, "127.0.0.1", 8123, "t", 0)
    msgs = [codec.Message("t", b"m%d" % i) for i in range(n)]
    return Batch(part, msgs, 0, 28 * n)


def test_batch_is_a_sequence_of_messages() -> None:
    b = _batch(5)
    assert isinstance(b, collections.abc.Sequence)
    assert b[0].data == b"m0" and b[-1].data == b"m4"  # was TypeError: 'Batch' object is not subscriptable
    assert [m.data for m in b[1:3]] == [b"m1", b"m2"]
    assert len(b) == 5 and [m.data for m in reversed(b)][0] == b"m4"
    assert b.index(b[2]) == 2 and b[3] in b
    with pytest.raises(IndexError):
        b[5]
    assert bool(_batch(0))  # an (unusual) empty batch is still a batch to confirm
