"""What tubemq.otel costs on pipelined sends: uninstrumented vs metrics only vs spans, in one run.

20,000 ``Producer.send_async`` of 100 B (then ``flush``) per trial against the embedded server (a child
process on 127.0.0.1), the three modes interleaved trial by trial so that a busy machine slows them
alike; the median of the trials is reported, with the ratios to the uninstrumented client, both of the
rate and of the client's CPU time per message (all its threads: less sensitive to other load on the
machine than the rate).

* ``plain``    no instrumentation
* ``metrics``  ``tubemq.otel.instrument(spans=False)``: the four semantic-convention metrics, no span
* ``spans``    ``tubemq.otel.instrument()``: a span per message, BatchSpanProcessor with an exporter that
  drops everything (the cost of making spans, not of shipping them), and the metrics

Both instrumented modes use the OpenTelemetry SDK's MeterProvider with an in-memory reader.

Each trial also measures the SDK's own floor, without any client: the same TracerProvider and
BatchSpanProcessor, ``tracer.start_span`` with the send span's five start attributes, ``set_attributes``
with its four answer attributes, ``end`` -- one span at a time (``floor``) and with all of the trial's
spans open before the first ends, as pipelined sends leave them (``floor open``). The client's CPU per
message in ``spans`` mode cannot be below ``plain`` + the floor.

Usage: python bench/otel_cost.py [--messages 20000] [--trials 5] [--size 100]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_server import create_topic, embedded_server  # noqa: E402
from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult  # noqa: E402

import tubemq  # noqa: E402
import tubemq.otel  # noqa: E402

MODES = ("plain", "metrics", "spans")
FLOORS = ("floor", "floor open")


class NullExporter(SpanExporter):
    def export(self, spans: Sequence[Any]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def trial(master: str, topic: str, mode: str, messages: int, size: int) -> tuple[float, float]:
    """(msg/s, client CPU us per message: every thread of this process, from process_time)."""
    payload = os.urandom(size)
    tracer_provider = None
    if mode != "plain":
        meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
        if mode == "spans":
            tracer_provider = TracerProvider()
            tracer_provider.add_span_processor(BatchSpanProcessor(NullExporter()))
        tubemq.otel.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider,
                               spans=mode == "spans")
    try:
        with tubemq.Producer(master) as p:
            for f in [p.send_async(topic, payload) for _ in range(1000)]:  # connected, published, warm
                f.result(30)
            send_async = p.send_async
            t0, c0 = time.perf_counter(), time.process_time()
            futures = [send_async(topic, payload) for _ in range(messages)]
            if p.flush(60):
                raise SystemExit(f"{mode}: messages still pending after 60 s")
            elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
            failed = sum(1 for f in futures if f.exception() is not None)
            if failed:
                raise SystemExit(f"{mode}: {failed} sends failed")
        return messages / elapsed, cpu / messages * 1e6
    finally:
        tubemq.otel.uninstrument()
        if tracer_provider is not None:
            tracer_provider.shutdown()


def span_floor(messages: int, all_open: bool) -> float:
    """CPU us per span (all threads, the export worker's too) of the SDK alone: see the docstring."""
    from opentelemetry.trace import SpanKind

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(NullExporter()))
    tracer = provider.get_tracer("floor")
    start = {"messaging.system": "tubemq", "messaging.operation.type": "send", "messaging.operation.name": "send",
             "messaging.destination.name": "otelcost", "messaging.client.id": "127.0.0.1-12345-1700000000000-1-1"}
    answers: list[dict[str, Any]] = [{"messaging.destination.partition.id": str(i % 3), "messaging.message.id": str(10**9 + i),
                "server.address": "127.0.0.1", "server.port": 8123} for i in range(messages)]
    try:
        c0 = time.process_time()
        if all_open:
            spans = [tracer.start_span("send otelcost", kind=SpanKind.PRODUCER, attributes=start)
                     for _ in range(messages)]
            for span, answer in zip(spans, answers, strict=True):
                span.set_attributes(answer)
                span.end()
            del spans
        else:
            for answer in answers:
                span = tracer.start_span("send otelcost", kind=SpanKind.PRODUCER, attributes=start)
                span.set_attributes(answer)
                span.end()
        provider.force_flush()
        return (time.process_time() - c0) / messages * 1e6
    finally:
        provider.shutdown()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=20000)
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--size", type=int, default=100)
    args = ap.parse_args()
    rates: dict[str, list[float]] = {m: [] for m in MODES}
    cpus: dict[str, list[float]] = {m: [] for m in MODES + FLOORS}
    with tempfile.TemporaryDirectory() as data, embedded_server(data) as (mport, _bport, aport):
        create_topic(aport, "otelcost", 3)
        master = f"127.0.0.1:{mport}"
        for i in range(args.trials):
            order = MODES[i % 3:] + MODES[:i % 3]  # who goes first rotates
            for mode in order:
                rate, cpu = trial(master, "otelcost", mode, args.messages, args.size)
                rates[mode].append(rate)
                cpus[mode].append(cpu)
            cpus["floor"].append(span_floor(args.messages, all_open=False))
            cpus["floor open"].append(span_floor(args.messages, all_open=True))
            print(f"trial {i + 1}: " + ", ".join(f"{m} {rates[m][-1]:,.0f} msg/s {cpus[m][-1]:.0f} us"
                                                 for m in MODES)
                  + ", " + ", ".join(f"{m} {cpus[m][-1]:.0f} us" for m in FLOORS), flush=True)
    plain, plain_cpu = statistics.median(rates["plain"]), statistics.median(cpus["plain"])
    print(f"\n{args.messages} send_async of {args.size} B, median of {args.trials} trials "
          "(msg/s; client CPU per message, all threads):")
    for mode in MODES:
        med, cpu = statistics.median(rates[mode]), statistics.median(cpus[mode])
        print(f"  {mode:8s} {med:10,.0f} msg/s {med / plain:5.2f}x   {cpu:6.1f} us/msg "
              f"{plain_cpu / cpu:5.2f}x")
    print("the SDK alone, no client (CPU per span, all threads), and the best spans could do on top of plain:")
    for floor in FLOORS:
        cpu = statistics.median(cpus[floor])
        print(f"  {floor:10s} {cpu:6.1f} us/span   plain + floor {plain_cpu + cpu:6.1f} us/msg "
              f"{plain_cpu / (plain_cpu + cpu):5.2f}x")


if __name__ == "__main__":
    main()
