"""``python -m tubemq`` runs the ``tubemq`` command line."""

from __future__ import annotations

import sys

from tubemq.cli import main

if __name__ == "__main__":
    sys.exit(main())
