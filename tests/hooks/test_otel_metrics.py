"""The clients' own metrics registry through OpenTelemetry (tubemq.otel.observe) and Prometheus
(tubemq.otel.prometheus), with the real SDK reader and prometheus_client, over real TCP."""

from __future__ import annotations

import re
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

import tubemq
from tubemq import otel
from tubemq.metrics import Histogram, bucket_upper_s
from tubemq.otel import prometheus, registry

prometheus_client = pytest.importorskip("prometheus_client", reason="prometheus-client (test group)")

FAST = {"heartbeat_period_ms": 300, "rpc_timeout_ms": 5000}


def points(reader: InMemoryMetricReader) -> dict[str, Any]:
    data = reader.get_metrics_data()
    return {m.name: m for rm in (data.resource_metrics if data else []) for sm in rm.scope_metrics
            for m in sm.metrics}


def test_export_bounds_are_registry_boundaries_and_fold_exactly() -> None:
    h = Histogram()
    samples = [0.00002, 0.0004, 0.0004, 0.003, 0.25, 1.5, 500.0]
    for s in samples:
        h.record(s)
    counts, total = h.buckets()
    assert sum(counts) == len(samples) and total == pytest.approx(sum(samples))
    uppers = {bucket_upper_s(i) for i in range(len(counts))}
    assert set(registry.EXPORT_BOUNDS) <= uppers  # a subset of the registry's own boundaries
    folded = registry.export_counts(counts)
    assert len(folded) == len(registry.EXPORT_BOUNDS) + 1 and sum(folded) == len(samples)
    assert folded[-1] == 1  # 500 s is beyond the last bound
    for s in samples[:-1]:  # each sample lands in the export bucket whose bounds hold it
        j = next(i for i, b in enumerate(registry.EXPORT_BOUNDS) if s <= b)
        assert folded[j] >= 1


def test_producer_registry_as_otel_instruments(cluster) -> None:
    reader = InMemoryMetricReader()
    cluster.create_topic("bridged", partitions=1)
    with tubemq.Producer(cluster.master_address, **FAST) as p:
        bridge = otel.observe(p, MeterProvider(metric_readers=[reader]), name="orders-producer")
        for i in range(40):
            p.send("bridged", b"%d" % i)
        names = points(reader)
        snap = p.metrics()
        bridge.close()
    acked = names["tubemq.producer.acknowledged"].data.data_points
    assert [dp.value for dp in acked] == [40] and acked[0].attributes["tubemq.client"] == "orders-producer"
    assert names["tubemq.producer.acknowledged"].data.is_monotonic
    for gauge in ("tubemq.producer.in_flight", "tubemq.producer.outstanding", "tubemq.producer.backlog"):
        assert gauge in names and type(names[gauge].data).__name__ == "Gauge"
    assert "tubemq.producer.unknown_outcome" in names  # a rare counter, reported from 0
    connected = names["tubemq.broker.connected"].data.data_points
    [broker] = list(snap["brokers"])
    assert [(dp.attributes["server.address"], dp.attributes["server.port"], dp.value) for dp in connected] == \
        [(broker.rsplit(":", 1)[0], int(broker.rsplit(":", 1)[1]), 1)]
    assert "tubemq.master.registered" in names
    latency = names["tubemq.producer.send_latency"].data.data_points
    assert tuple(latency[0].explicit_bounds) == registry.EXPORT_BOUNDS
    assert sum(dp.count for dp in latency) == snap["latency"]["producer.send_latency"]["count"] > 0
    reader2 = points(reader)  # closed: nothing observed any more
    assert "tubemq.producer.acknowledged" not in reader2 or \
        not reader2["tubemq.producer.acknowledged"].data.data_points


def test_consumer_registry_through_prometheus(cluster) -> None:
    cluster.create_topic("scraped", partitions=1)
    with tubemq.Producer(cluster.master_address, **FAST) as p:
        for i in range(5):
            p.send("scraped", b"%d" % i)
    reg = prometheus_client.CollectorRegistry()
    with tubemq.Consumer(cluster.master_address, group="gscrape", topics=["scraped"], consume_from="earliest",
                         iter_timeout_ms=3000, msg_not_found_wait_ms=50, **FAST) as c:
        prometheus.register({"billing": c}, registry=reg)
        got = 0
        for _ in c:
            got += 1
            if got == 5:
                break
        text = prometheus_client.generate_latest(reg).decode()
    assert re.search(r'^tubemq_consumer_messages_total\{client="billing"\} 5\.0$', text, re.M), text
    assert re.search(r'^tubemq_consumer_in_flight\{client="billing"\} ', text, re.M)
    assert re.search(r'^tubemq_broker_healthy\{client="billing",server_address="127\.0\.0\.1",server_port="\d+"\} 1\.0$',
                     text, re.M)
    count = float(re.search(r'^tubemq_consumer_fetch_latency_seconds_count\{client="billing"\} (\S+)$', text, re.M)[1])
    inf = float(re.search(r'^tubemq_consumer_fetch_latency_seconds_bucket\{client="billing",le="\+Inf"\} (\S+)$',
                          text, re.M)[1])
    assert count == inf >= 1
    assert text.count('tubemq_consumer_fetch_latency_seconds_bucket{client="billing"') == len(registry.EXPORT_BOUNDS) + 1


def test_rare_counters_are_the_registry_inc_names() -> None:
    """Every counter the clients count only when it happens is in registry.RARE_COUNTERS."""
    from pathlib import Path

    src = Path(tubemq.__file__).parent
    found = set()
    for path in [*(src / "consumer").rglob("*.py"), *(src / "producer").rglob("*.py"), *(src / "client").rglob("*.py")]:
        found |= set(re.findall(r'(?:\.inc|_count)\("([a-z_.]+)"', path.read_text(encoding="utf-8")))
    assert found and found <= set(registry.RARE_COUNTERS), sorted(found - set(registry.RARE_COUNTERS))
