"""Fixtures for net-layer tests: ``frame_server`` (scripted TubeMQ-framing TCP server) and ``run``."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from frameserver import frame_server, run  # noqa: E402,F401
