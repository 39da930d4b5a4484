"""tubemq.otel with the OpenTelemetry SDK's in-memory exporters, over real TCP, both APIs."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

# the "test" extra installs the SDK: missing is a failure, not a skip
import opentelemetry.sdk.trace as trace_sdk
import pytest
from opentelemetry import baggage, context, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

import tubemq
import tubemq.aio
from tubemq import otel
from tubemq.sync import producer as psync

FAST = {"heartbeat_period_ms": 300, "rpc_timeout_ms": 5000}
CONSUMER = {"heartbeat_period_ms": 300, "rpc_timeout_ms": 5000, "msg_not_found_wait_ms": 50,
            "consume_from": "earliest", "iter_timeout_ms": 3000}


@pytest.fixture
def otel_on() -> Iterator[tuple[InMemorySpanExporter, InMemoryMetricReader, Any]]:
    exporter = InMemorySpanExporter()
    provider = trace_sdk.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    otel.instrument(tracer_provider=provider, meter_provider=MeterProvider(metric_readers=[reader]))
    try:
        yield exporter, reader, provider.get_tracer("test")
    finally:
        otel.uninstrument()


def test_encoding_round_trip() -> None:
    for value in ("k1=v1,k2=v2", "a=%2C,b=$msgType$", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", ""):
        enc = otel.encode_value(value)
        assert "," not in enc and "=" not in enc and "$" not in enc
        assert otel.decode_value(enc) == value


def test_off_by_default_and_uninstrument_restores() -> None:
    assert not otel.is_instrumented()
    original = psync.Producer.__dict__["send"]
    otel.instrument()
    try:
        assert psync.Producer.__dict__["send"] is not original
    finally:
        otel.uninstrument()
    assert psync.Producer.__dict__["send"] is original and not otel.is_instrumented()


def test_sync_spans_context_and_metrics(cluster, otel_on) -> None:
    exporter, reader, tracer = otel_on
    cluster.create_topic("traced", partitions=1)
    with tracer.start_as_current_span("parent") as parent:
        ctx = baggage.set_baggage("tenant", "a=b,c")  # ',' and '=' must survive the attribute format
        token = context.attach(ctx)
        try:
            with tubemq.Producer(cluster.master_address, **FAST) as p:
                r = p.send("traced", b"one", attributes={"user": "x"})
                f = p.send_async("traced", b"two")
                assert p.flush(timeout=30) == 0
                f.result(timeout=5)
        finally:
            context.detach(token)
    trace_id = parent.get_span_context().trace_id
    got = []
    with tubemq.Consumer(cluster.master_address, group="gtraced", topics=["traced"], **CONSUMER) as c:
        for msg in c:
            got.append(msg)
            if len(got) == 2:
                break
    sends = [s for s in exporter.get_finished_spans() if s.kind == SpanKind.PRODUCER]
    assert len(sends) == 2 and all(s.name == "send traced" for s in sends)
    assert all(s.context.trace_id == trace_id for s in sends)
    first = next(s for s in sends if s.attributes["messaging.message.id"] == str(r.message_id))
    assert first.attributes["messaging.system"] == "tubemq"
    assert first.attributes["messaging.destination.partition.id"] == str(r.partition.partition_id)
    for msg in got:
        assert "," not in msg.attributes["baggage"]
        assert baggage.get_baggage("tenant", otel.extract(msg)) == "a=b,c"
        child = trace.get_current_span(otel.extract(msg)).get_span_context()
        assert child.trace_id == trace_id and child.span_id in {s.context.span_id for s in sends}
    assert next(m for m in got if m.data == b"one").attributes["user"] == "x"
    receives = [s for s in exporter.get_finished_spans() if s.kind == SpanKind.CONSUMER]
    assert receives and all(s.name == "receive traced" for s in receives)
    linked = {link.context.span_id for s in receives for link in s.links}
    assert linked == {s.context.span_id for s in sends}
    names = {m.name: m for rm in reader.get_metrics_data().resource_metrics for sm in rm.scope_metrics
             for m in sm.metrics}
    assert sum(dp.value for dp in names["messaging.client.sent.messages"].data.data_points) == 2
    assert sum(dp.value for dp in names["messaging.client.consumed.messages"].data.data_points) == 2
    assert "messaging.client.operation.duration" in names


def test_asyncio_send_span_and_error(cluster, otel_on) -> None:
    exporter, _, _ = otel_on
    cluster.create_topic("tracedaio", partitions=1)

    async def main() -> None:
        async with tubemq.aio.Producer(cluster.master_address, **FAST) as p:
            await p.send("tracedaio", b"a")
            fut = await p.send_async("tracedaio", b"b")
            await fut
            await p.send_and_wait("tracedaio", b"c")
            with pytest.raises(tubemq.errors.TubeMQError):
                await p.send("tracedaio", b"")  # refused before it is queued: an error span

    asyncio.run(main())
    sends = [s for s in exporter.get_finished_spans() if s.kind == SpanKind.PRODUCER]
    assert len(sends) == 4
    failed = [s for s in sends if "error.type" in s.attributes]
    assert len(failed) == 1 and failed[0].status.status_code == trace.StatusCode.ERROR
