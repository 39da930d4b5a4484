#!/usr/bin/env bash
# The client suites end to end on the pure-Python twin (tubemq.codec.python, tubemq.codec._inlongmsg_py): the codec,
# InLongMsg, connections, producer, consumer, the embedded server they talk to, the captured-traffic
# fidelity tests and the multi-process cluster tests. Extra arguments go to pytest (e.g. -x, -n 2).
#   bash scripts/test_twin.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export TUBEMQ_NO_EXTENSIONS=1
python -c "import tubemq.codec as c; assert c.implementation == 'python', c.implementation"
exec python -m pytest -q tests/codec tests/inlongmsg tests/net tests/producer tests/consumer tests/server \
    tests/fidelity tests/cluster tests/reliability tests/test_metrics.py tests/test_metrics_logging.py "$@"
