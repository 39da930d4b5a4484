#!/usr/bin/env python3
"""Export a producer's metrics to Prometheus and OpenTelemetry while it sends.

Needs the ``prometheus`` and ``otel`` extras and the OpenTelemetry SDK
(``pip install '.[prometheus,otel]' opentelemetry-sdk``). Run from the source tree with a local server
(``tubemq serve --data-dir ./tubemq-data --detach``)::

    tubemq topic create metrics_demo --if-not-exists
    python examples/metrics_export.py --master 127.0.0.1:8715 --topic metrics_demo --count 500

It serves the Prometheus text format on ``--port`` (0: a free port, printed), scrapes itself once and
prints a few lines of it, then reads the same registry through OpenTelemetry (``tubemq.otel.observe``)
and the semantic-convention metrics of ``tubemq.otel.instrument(spans=False)``. With ``--serve-seconds``
it keeps the endpoint up that long for a real Prometheus to scrape.
"""

from __future__ import annotations

import argparse
import time
import urllib.request

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from prometheus_client import CollectorRegistry, start_http_server

import tubemq
import tubemq.otel
import tubemq.otel.prometheus


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--master", default="127.0.0.1:8715")
    ap.add_argument("--topic", default="metrics_demo")
    ap.add_argument("--count", type=int, default=500)
    ap.add_argument("--port", type=int, default=0, help="Prometheus endpoint port (0: a free one)")
    ap.add_argument("--serve-seconds", type=float, default=0.0)
    args = ap.parse_args()

    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    tubemq.otel.instrument(meter_provider=meters, spans=False)  # the semantic-convention metrics only
    registry = CollectorRegistry()
    with tubemq.Producer(args.master) as producer:
        tubemq.otel.prometheus.register({"demo": producer}, registry=registry)
        bridge = tubemq.otel.observe(producer, meters, name="demo")
        server, _thread = start_http_server(args.port, addr="127.0.0.1", registry=registry)
        port = server.server_address[1]
        print(f"prometheus endpoint: http://127.0.0.1:{port}/metrics")
        futures = [producer.send_async(args.topic, b"event %d" % i) for i in range(args.count)]
        producer.flush(30)
        failed = sum(1 for f in futures if f.exception(timeout=30) is not None)

        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
        for line in text.splitlines():
            if line.startswith(("tubemq_producer_acknowledged_total", "tubemq_producer_in_flight",
                                "tubemq_broker_connected", "tubemq_producer_send_latency_seconds_count")):
                print(line)
        data = reader.get_metrics_data()
        metrics = {m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
        acked = sum(p.value for p in metrics["tubemq.producer.acknowledged"].data.data_points)
        sent = sum(p.value for p in metrics["messaging.client.sent.messages"].data.data_points)
        print(f"otel: tubemq.producer.acknowledged {acked}, messaging.client.sent.messages {sent}, failed {failed}")
        if args.serve_seconds > 0:
            time.sleep(args.serve_seconds)
        bridge.close()
        server.shutdown()
    tubemq.otel.uninstrument()


if __name__ == "__main__":
    main()
