"""pytest plugin: a real TubeMQ cluster for each test that asks for one.

Installed with tubemq (entry point ``pytest11``: ``tubemq``), so a user's suite gets, with no conftest:

* ``tubemq_cluster``: a started :class:`tubemq.server.EmbeddedCluster` (master + broker on 127.0.0.1,
  ephemeral ports, a fresh data directory under the test's tmp folder), stopped after the test;
* ``tubemq_master``: its master address (``"127.0.0.1:PORT"``), what ``Producer``/``Consumer`` take;
* ``tubemq_proxies``: a :class:`tubemq.testing.FaultProxy` in front of that cluster's master and each
  broker (brokers advertised through theirs): clients given ``tubemq_proxies.master_address`` pass a
  proxy for every byte, and ``tubemq_proxies.blackhole()`` / ``reset()`` / ``vanish()`` /
  ``half_open()`` / ``delay(ms)`` / ``bandwidth(bps)`` / ``heal()`` inject network faults (no root).

``@pytest.mark.tubemq_cluster(brokers=2, topics={"orders": 4}, ...)`` passes server options (any
``EmbeddedCluster`` keyword) and topics to create (name -> partitions, or a list of names for 3 each).
The ini option ``tubemq_fast_timers`` (default true) applies ``tubemq.server.testing.FAST_TIMERS`` so
rebalances take a fraction of a second, while client expiries stay 2.5 default client heartbeat periods
(a default-settings client is never timed out between its heartbeats). Disable the plugin with ``-p no:tubemq``.

Importing this module loads only pytest: the server is imported when a fixture is first used, so the
plugin costs nothing in suites that never ask for a cluster.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from tubemq.server import EmbeddedCluster
    from tubemq.testing import ClusterProxies

MARKER = "tubemq_cluster"
DEFAULT_PARTITIONS = 3


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini("tubemq_fast_timers", type="bool", default=True,
                  help="tubemq_cluster: short balance and expiry periods (tubemq.server.testing.FAST_TIMERS)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(topics=..., **options): topics to create and EmbeddedCluster options for the test's "
        "tubemq_cluster fixture",
    )


def _topics(spec: Any) -> dict[str, int]:
    """``{"t": 4}`` or ``["t", "u"]`` (3 partitions each) -> name -> partitions."""
    if spec is None:
        return {}
    if isinstance(spec, str):
        spec = [spec]
    if isinstance(spec, Mapping):
        items = dict(spec)
    else:
        items = {name: DEFAULT_PARTITIONS for name in spec}
    for name, parts in items.items():
        if not isinstance(name, str) or not isinstance(parts, int) or isinstance(parts, bool) or parts < 1:
            raise pytest.UsageError(f"{MARKER}: topics must map names to partition counts >= 1, got {name!r}: "
                                    f"{parts!r}")
    return items


def _options(request: pytest.FixtureRequest) -> tuple[dict[str, Any], dict[str, int]]:
    from tubemq.server.testing import FAST_TIMERS

    options: dict[str, Any] = dict(FAST_TIMERS) if request.config.getini("tubemq_fast_timers") else {}
    topics: dict[str, int] = {}
    marker = request.node.get_closest_marker(MARKER)
    if marker is not None:
        if marker.args:
            raise pytest.UsageError(f"{MARKER} takes keyword arguments only, got {marker.args!r}")
        kwargs = dict(marker.kwargs)
        topics = _topics(kwargs.pop("topics", None))
        if "data_dir" in kwargs:
            raise pytest.UsageError(f"{MARKER}: data_dir is the test's own tmp folder; it cannot be set")
        options.update(kwargs)
    return options, topics


@pytest.fixture
def tubemq_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
                   ) -> Iterator[EmbeddedCluster]:
    """A running embedded TubeMQ cluster on 127.0.0.1 (ephemeral ports, private data), torn down after."""
    from tubemq.server import EmbeddedCluster

    options, topics = _options(request)
    data_dir = tmp_path_factory.mktemp("tubemq-data", numbered=True)
    with EmbeddedCluster(data_dir, **options) as cluster:
        for name, partitions in topics.items():
            cluster.create_topic(name, partitions=partitions)
        yield cluster


@pytest.fixture
def tubemq_master(tubemq_cluster: EmbeddedCluster) -> str:
    """The running cluster's master address, ``"127.0.0.1:PORT"``."""
    return tubemq_cluster.master_address


@pytest.fixture
def tubemq_proxies(tubemq_cluster: EmbeddedCluster) -> Iterator[ClusterProxies]:
    """Fault proxies in front of the cluster's master and brokers (``tubemq.testing.proxy_cluster``)."""
    from tubemq.testing import proxy_cluster

    with proxy_cluster(tubemq_cluster) as proxies:
        yield proxies
