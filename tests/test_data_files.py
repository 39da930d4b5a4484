"""The suite's data ships with it: every file the tests read is under tests/data, and a missing one fails."""

from __future__ import annotations

import pytest
from _data import CAPTURES_DIR, capture_path, data_path, load_capture, vector

SCENARIOS = ["s1_producer", "s2_consumer_pull", "s3_rebalance", "s4_filter", "s5_client_balance",
             "s6a_errors_send", "s6b_errors_master", "s6c_errors_consumer_broker", "s6d_errors_transport"]


@pytest.mark.parametrize("name", SCENARIOS)
def test_every_capture_is_shipped(name: str) -> None:
    doc = load_capture(name)
    assert doc["frames"], name


def test_captures_are_all_known() -> None:
    """A capture added to tests/data without being listed here would go unchecked by the test above."""
    assert sorted(p.stem for p in CAPTURES_DIR.glob("*.json")) == sorted(SCENARIOS)
    assert data_path("captures", "README.md").stat().st_size > 0


def test_vectors_and_golden_frames_are_shipped() -> None:
    assert vector("auth_signature")
    assert data_path("java_golden_frames.json").stat().st_size > 0


def test_missing_file_raises_not_skips() -> None:
    with pytest.raises(FileNotFoundError, match="no_such_scenario.json"):
        capture_path("no_such_scenario")
    with pytest.raises(KeyError, match="no_such_vector"):
        vector("no_such_vector")
