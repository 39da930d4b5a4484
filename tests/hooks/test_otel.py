"""tubemq.otel with the OpenTelemetry SDK's in-memory exporters, over real TCP, both APIs."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

# the "test" extra installs the SDK: missing is a failure, not a skip
import opentelemetry.sdk.trace as trace_sdk
import pytest
from opentelemetry import baggage, context, trace
from opentelemetry.context import Context
from opentelemetry.propagators.textmap import TextMapPropagator, default_setter
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
    receives = [s for s in exporter.get_finished_spans() if s.name.startswith("receive")]
    assert receives and all(s.name == "receive traced" and s.kind == SpanKind.CLIENT for s in receives)
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


# ---------------------------------------------------------------------------------------- semantic conventions

def metric_points(reader: InMemoryMetricReader) -> dict[str, Any]:
    data = reader.get_metrics_data()
    return {m.name: m for rm in (data.resource_metrics if data else []) for sm in rm.scope_metrics
            for m in sm.metrics}


def test_duration_buckets_operation_name_and_server_on_every_metric(cluster, otel_on) -> None:
    _, reader, _ = otel_on
    cluster.create_topic("semconv", partitions=1)
    with tubemq.Producer(cluster.master_address, **FAST) as p:
        r = p.send("semconv", b"x")
    with tubemq.Consumer(cluster.master_address, group="gsem", topics=["semconv"], **CONSUMER) as c:
        assert next(iter(c)).data == b"x"
    names = metric_points(reader)
    duration = names["messaging.client.operation.duration"]
    for dp in duration.data.data_points:
        assert tuple(dp.explicit_bounds) == otel.DURATION_BUCKETS == (
            0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
    ops = {dp.attributes["messaging.operation.name"]: dp for dp in duration.data.data_points}
    assert set(ops) == {"send", "receive"}  # receive durations are recorded too
    assert ops["receive"].attributes["messaging.consumer.group.name"] == "gsem"
    for metric in ("messaging.client.sent.messages", "messaging.client.consumed.messages",
                   "messaging.client.operation.duration"):
        for dp in names[metric].data.data_points:
            attrs = dp.attributes
            assert attrs["messaging.system"] == "tubemq" and attrs["messaging.destination.name"] == "semconv"
            assert attrs["messaging.operation.name"] in ("send", "receive")
            assert attrs["server.address"] == r.partition.host and attrs["server.port"] == r.partition.port


def test_receive_span_covers_the_poll_wait(cluster, otel_on) -> None:
    """The span starts when poll is called, before the message even exists, and ends at delivery."""
    exporter, _, _ = otel_on
    cluster.create_topic("late", partitions=1)
    with tubemq.Consumer(cluster.master_address, group="glate", topics=["late"], **CONSUMER) as c:
        c.poll(timeout=0.3)  # registered, nothing there yet

        def produce_later() -> None:
            time.sleep(0.4)
            with tubemq.Producer(cluster.master_address, **FAST) as p:
                p.send("late", b"y")

        threading.Thread(target=produce_later, daemon=True).start()
        t0 = time.time_ns()
        batch = None
        deadline = time.monotonic() + 20
        while batch is None and time.monotonic() < deadline:
            batch = c.poll(timeout=10)
        assert batch is not None
        t1 = time.time_ns()
        c.confirm(batch)
    [receive] = [s for s in exporter.get_finished_spans() if s.name == "receive late"]
    assert receive.kind == SpanKind.CLIENT
    assert receive.start_time <= t0 + 50_000_000 and receive.end_time <= t1 + 50_000_000
    assert receive.end_time - receive.start_time >= 300_000_000, receive.end_time - receive.start_time
    attrs = receive.attributes
    assert attrs["messaging.operation.type"] == "receive" and attrs["messaging.batch.message_count"] == 1
    assert attrs["server.port"] == int(cluster.broker_address.rsplit(":", 1)[1])


def test_blocking_iterator_receive_starts_at_its_fetch_request(cluster, otel_on) -> None:
    exporter, _, _ = otel_on
    cluster.create_topic("iterfetch", partitions=1)
    with tubemq.Producer(cluster.master_address, **FAST) as p:
        p.send("iterfetch", b"a")
    with tubemq.Consumer(cluster.master_address, group="giter", topics=["iterfetch"], **CONSUMER) as c:
        for _ in c:
            break
    [receive] = [s for s in exporter.get_finished_spans() if s.name == "receive iterfetch"]
    assert receive.kind == SpanKind.CLIENT and receive.end_time > receive.start_time
    assert receive.end_time - receive.start_time > 20_000  # a round trip, not a bookkeeping instant


def test_listener_gets_a_process_span_in_the_send_trace(cluster, otel_on) -> None:
    exporter, reader, tracer = otel_on
    cluster.create_topic("pushed", partitions=1)
    with tracer.start_as_current_span("request") as parent:
        with tubemq.Producer(cluster.master_address, **FAST) as p:
            p.send("pushed", b"m")
    seen: list[Any] = []
    done = threading.Event()

    def listener(msg: Any) -> None:
        seen.append(trace.get_current_span().get_span_context())
        with tracer.start_as_current_span("handle"):
            pass
        done.set()

    with tubemq.Consumer(cluster.master_address, group="gpush", topics=["pushed"], **CONSUMER) as c:
        c.subscribe(listener)
        assert done.wait(20)
    spans = exporter.get_finished_spans()
    [process] = [s for s in spans if s.name == "process pushed"]
    [handle] = [s for s in spans if s.name == "handle"]
    [send] = [s for s in spans if s.name == "send pushed"]
    assert process.kind == SpanKind.CONSUMER
    assert process.context.trace_id == parent.get_span_context().trace_id  # parented by the message
    assert process.parent.span_id == send.context.span_id
    assert [link.context.span_id for link in process.links] == [send.context.span_id]
    assert seen[0].span_id == process.context.span_id  # current while the listener runs
    assert handle.parent.span_id == process.context.span_id
    assert process.attributes["messaging.operation.type"] == "process"
    assert process.attributes["messaging.consumer.group.name"] == "gpush"
    proc = metric_points(reader)["messaging.process.duration"]
    assert sum(dp.count for dp in proc.data.data_points) == 1


def test_asyncio_coroutine_listener_process_span(cluster, otel_on) -> None:
    exporter, _, _ = otel_on
    cluster.create_topic("apushed", partitions=1)

    async def main() -> None:
        async with tubemq.aio.Producer(cluster.master_address, **FAST) as p:
            await p.send("apushed", b"m")
        done = asyncio.Event()

        async def listener(msg: Any) -> None:
            await asyncio.sleep(0.05)
            done.set()

        async with tubemq.aio.Consumer(cluster.master_address, group="gapush", topics=["apushed"],
                                       **CONSUMER) as c:
            c.subscribe(listener)
            await asyncio.wait_for(done.wait(), 20)
            await asyncio.sleep(0.05)

    asyncio.run(main())
    [process] = [s for s in exporter.get_finished_spans() if s.name == "process apushed"]
    assert process.kind == SpanKind.CONSUMER and process.end_time - process.start_time >= 40_000_000


def test_bound_consumer_and_read_range_spans(cluster, otel_on) -> None:
    exporter, reader, _ = otel_on
    cluster.create_topic("bound", partitions=1)
    with tubemq.Producer(cluster.master_address, **FAST) as p:
        for i in range(3):
            p.send("bound", b"b%d" % i)
    with tubemq.BoundConsumer(cluster.master_address, "gbound", ["bound"], **FAST) as bc:
        [part] = bc.partitions()
        got = list(bc.read_range(part, 0, None, timeout=10))
        assert len(got) == 3
    receives = [s for s in exporter.get_finished_spans() if s.name == "receive bound"]
    assert receives and all(s.kind == SpanKind.CLIENT for s in receives)
    sends = {s.context.span_id for s in exporter.get_finished_spans() if s.name == "send bound"}
    assert {link.context.span_id for s in receives for link in s.links} == sends
    assert receives[0].attributes["messaging.consumer.group.name"] == "gbound"
    consumed = metric_points(reader)["messaging.client.consumed.messages"]
    assert sum(dp.value for dp in consumed.data.data_points) >= 3


def test_user_traceparent_is_kept_and_linked(cluster, otel_on) -> None:
    exporter, _, _ = otel_on
    cluster.create_topic("ownctx", partitions=1)
    own = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    with tubemq.Producer(cluster.master_address, **FAST) as p:
        p.send("ownctx", b"z", attributes={"traceparent": own})
    with tubemq.Consumer(cluster.master_address, group="gown", topics=["ownctx"], **CONSUMER) as c:
        msg = next(iter(c))
    assert msg.attributes["traceparent"] == own
    [send] = [s for s in exporter.get_finished_spans() if s.name == "send ownctx"]
    assert [format(link.context.span_id, "016x") for link in send.links] == ["b7ad6b7169203331"]


def test_metrics_only_mode_makes_no_span_and_keeps_the_attributes(cluster) -> None:
    exporter = InMemorySpanExporter()
    provider = trace_sdk.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    otel.instrument(tracer_provider=provider, meter_provider=MeterProvider(metric_readers=[reader]), spans=False)
    try:
        assert otel.is_instrumented() and not otel.spans_enabled()
        cluster.create_topic("metered", partitions=1)
        calls: list[Any] = []
        with tubemq.Producer(cluster.master_address, **FAST) as p:
            futures = [p.send_async("metered", b"%d" % i, callback=lambda r, e: calls.append(e)) for i in range(20)]
            assert p.flush(timeout=30) == 0
            for f in futures:
                f.result(timeout=5)
            p.send("metered", b"last")
        assert calls == [None] * 20  # the application's callback still runs
        with tubemq.Consumer(cluster.master_address, group="gmeter", topics=["metered"], **CONSUMER) as c:
            msg = next(iter(c))
        assert "traceparent" not in msg.attributes
        names = metric_points(reader)
    finally:
        otel.uninstrument()
    assert exporter.get_finished_spans() == ()
    sent = names["messaging.client.sent.messages"].data.data_points
    assert sum(dp.value for dp in sent) == 21  # every send counted
    # pipelined sends are counted when made (by destination); the blocking send with its broker
    by_server = {dp.attributes.get("server.port"): dp.value for dp in sent}
    assert by_server[None] == 20 and sum(v for k, v in by_server.items() if k) == 1
    durations = [dp for dp in names["messaging.client.operation.duration"].data.data_points
                 if dp.attributes["messaging.operation.name"] == "send"]
    assert 1 <= sum(dp.count for dp in durations) <= 21 // otel.instrumentation.DURATION_SAMPLE + 2  # sampled
    assert all(dp.attributes["server.port"] > 0 for dp in durations)  # recorded at the answer
    assert sum(dp.value for dp in names["messaging.client.consumed.messages"].data.data_points) >= 1


def test_failed_send_counts_with_error_type(cluster, otel_on) -> None:
    _, reader, _ = otel_on
    with tubemq.Producer(cluster.master_address, **FAST) as p:
        with pytest.raises(tubemq.errors.TubeMQError):
            p.send("nosuchtopic", b"q", timeout=3)
    sent = metric_points(reader)["messaging.client.sent.messages"]
    [dp] = [dp for dp in sent.data.data_points if "error.type" in dp.attributes]
    assert dp.value == 1 and dp.attributes["messaging.destination.name"] == "nosuchtopic"


def test_direct_traceparent_is_the_propagators_own(monkeypatch) -> None:
    """The send's traceparent written without the propagation API is the header the API writes."""
    from opentelemetry import propagate

    from tubemq.otel.propagation import inject_span

    provider = trace_sdk.TracerProvider()
    tracer = provider.get_tracer("test")
    for flags_sampler in (trace_sdk.sampling.ALWAYS_ON, trace_sdk.sampling.ALWAYS_OFF):
        provider.sampler = flags_sampler
        span = tracer.start_span("send t")
        expected: dict[str, str] = {"k": "v"}
        propagate.inject(expected, context=trace.set_span_in_context(span))
        with monkeypatch.context() as m:  # the direct way indeed: the API is not asked
            m.setattr(propagate, "inject", None)
            assert inject_span({"k": "v"}, span) == expected and "traceparent" in expected
        span.end()
    invalid = trace.NonRecordingSpan(trace.INVALID_SPAN_CONTEXT)  # the API without an SDK: nothing to carry
    assert inject_span(None, invalid) == {}


class _Upper(TextMapPropagator):
    """A propagator of the application's: its own header, not W3C's."""

    fields = {"x-trace"}

    def inject(self, carrier: Any, context: Any = None, setter: Any = default_setter) -> None:
        ctx = trace.get_current_span(context).get_span_context()
        if ctx.is_valid:
            setter.set(carrier, "x-trace", f"{ctx.span_id:x}")

    def extract(self, carrier: Any, context: Any = None, getter: Any = None) -> Any:
        return context if context is not None else Context()


def test_other_propagators_and_tracestate_take_the_general_way(cluster, otel_on) -> None:
    from opentelemetry import propagate
    from opentelemetry.trace.span import TraceState

    exporter, _, _ = otel_on
    cluster.create_topic("propagators", partitions=1)
    parent = trace.NonRecordingSpan(trace.SpanContext(
        0x0AF7651916CD43DD8448EB211C80319C, 0x00F067AA0BA902B7, is_remote=True,
        trace_flags=trace.TraceFlags(1), trace_state=TraceState([("vendor", "a1")])))
    default = propagate.get_global_textmap()
    try:
        with tubemq.Producer(cluster.master_address, **FAST) as p:
            token = context.attach(trace.set_span_in_context(parent))
            try:
                p.send_async("propagators", b"tracestate").result(timeout=10)  # inherited tracestate
            finally:
                context.detach(token)
            propagate.set_global_textmap(_Upper())
            p.send_async("propagators", b"upper").result(timeout=10)
    finally:
        propagate.set_global_textmap(default)
    with tubemq.Consumer(cluster.master_address, group="gprop", topics=["propagators"], **CONSUMER) as c:
        got = {}
        for msg in c:
            got[msg.data] = msg.attributes
            if len(got) == 2:
                break
    spans = {s.attributes["messaging.message.id"]: s for s in exporter.get_finished_spans()
             if s.name == "send propagators"}
    assert len(spans) == 2
    assert got[b"tracestate"]["traceparent"].startswith("00-0af7651916cd43dd8448eb211c80319c-")
    assert otel.decode_value(got[b"tracestate"]["tracestate"]) == "vendor=a1"
    assert "traceparent" not in got[b"upper"]
    assert int(got[b"upper"]["x-trace"], 16) in {s.context.span_id for s in spans.values()}


def test_sends_from_several_threads_are_all_counted(cluster) -> None:
    reader = InMemoryMetricReader()
    otel.instrument(meter_provider=MeterProvider(metric_readers=[reader]), spans=False)
    try:
        cluster.create_topic("threads", partitions=1)
        with tubemq.Producer(cluster.master_address, **FAST) as p:
            def work() -> None:
                for f in [p.send_async("threads", b"t") for _ in range(50)]:
                    f.result(timeout=10)
            threads = [threading.Thread(target=work) for _ in range(3)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(30)
            work()  # this thread too
            p.send("threads", b"last")
        sent = metric_points(reader)["messaging.client.sent.messages"].data.data_points
        assert sum(dp.value for dp in sent) == 201
        otel.uninstrument()
        otel.instrument(meter_provider=MeterProvider(metric_readers=[reader2 := InMemoryMetricReader()]),
                        spans=False)  # counting starts over, not from the cells of before
        with tubemq.Producer(cluster.master_address, **FAST) as p:
            p.send_async("threads", b"again").result(timeout=10)
        sent = metric_points(reader2)["messaging.client.sent.messages"].data.data_points
        assert sum(dp.value for dp in sent) == 1
    finally:
        otel.uninstrument()


# ---------------------------------------------------------------------------------------- instrumentor

def test_instrumentor_instruments_and_uninstruments() -> None:
    from opentelemetry.instrumentation.instrumentor import BaseInstrumentor

    from tubemq.otel import TubeMQInstrumentor

    inst = TubeMQInstrumentor()
    assert isinstance(inst, BaseInstrumentor)
    inst.instrument(spans=False)
    try:
        assert otel.is_instrumented() and not otel.spans_enabled()
    finally:
        inst.uninstrument()
    assert not otel.is_instrumented()


def test_entry_point_is_declared() -> None:
    from importlib.metadata import entry_points

    [ep] = [e for e in entry_points(group="opentelemetry_instrumentor") if e.name == "tubemq"]
    assert ep.load() is otel.TubeMQInstrumentor


SCRIPT = """
import tubemq, tubemq.otel
from opentelemetry import trace
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace import TracerProvider
exporter = InMemorySpanExporter()
provider = trace.get_tracer_provider()
if not hasattr(provider, "add_span_processor"):  # no distro configured the SDK: the proxy tracers follow
    provider = TracerProvider()
    trace.set_tracer_provider(provider)
provider.add_span_processor(SimpleSpanProcessor(exporter))
with tubemq.Producer(%r, heartbeat_period_ms=300, rpc_timeout_ms=5000) as p:
    p.send("zerocode", b"x")
print("instrumented", tubemq.otel.is_instrumented(), [s.name for s in exporter.get_finished_spans()])
"""


def test_opentelemetry_instrument_picks_tubemq_up(cluster, tmp_path) -> None:
    """Zero-code: ``opentelemetry-instrument python app.py`` loads the entry point."""
    tool = shutil.which("opentelemetry-instrument", path=os.path.dirname(sys.executable)) \
        or shutil.which("opentelemetry-instrument")
    if tool is None:
        pytest.skip("opentelemetry-instrument (opentelemetry-instrumentation) is not installed")
    cluster.create_topic("zerocode", partitions=1)
    app = tmp_path / "app.py"
    app.write_text(SCRIPT % cluster.master_address, encoding="utf-8")
    env = {**os.environ, "OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none",
           "OTEL_LOGS_EXPORTER": "none"}
    out = subprocess.run([tool, sys.executable, str(app)], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "instrumented True ['send zerocode']" in out.stdout, (out.stdout, out.stderr[-3000:])
