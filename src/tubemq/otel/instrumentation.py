"""Spans and metrics around the clients' public calls, put in place by :func:`instrument`.

Like the opentelemetry-instrumentation packages of other clients, this wraps methods of the client
classes (nothing in the clients calls OpenTelemetry): the producers' send methods, the consumer's
``poll`` and the engine's single delivery point ``ConsumerEngine.deliver`` (behind ``poll``, iteration,
a blocking iterator's own fetches and listeners of both APIs), the push consumer's ``subscribe`` (a process span around each
listener call) and the bound consumer's fetch (``fetch``, ``read_range`` and so the Spark source).
:func:`uninstrument` puts the plain methods back.

With ``spans=False`` (metrics only) no span is made and no context is injected, and the blocking
``send`` keeps its compiled fast path. In both modes sends are counted exactly in plain integers
here, reported through an observable counter, since an SDK measurement costs more than a pipelined send,
and one send in :data:`DURATION_SAMPLE` has its duration recorded (like the client's own
``producer.send_latency``; each send span has its own duration).
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from . import semconv as sc
from .propagation import TRACEPARENT, api, extract, extract_attributes, inject_span

_state: dict[str, Any] = {}  # tracer, instruments, originals: empty = not instrumented
#: when the running ``ConsumerCore.poll`` started (monotonic s): a receive span starts there
_POLL_START: contextvars.ContextVar[float | None] = contextvars.ContextVar("tubemq_otel_poll", default=None)
_MAX_ATTR_SETS = 4096  # metric attribute dicts kept for reuse (bounded: topics x brokers x outcomes)
#: one send in this many (and the first of each attribute set and thread) has its duration recorded
DURATION_SAMPLE = 32
#: sends counted since instrument(), per (attribute set (the key of _metric_attrs), thread): a thread
#: bumps only its own cells, so counting takes no lock; the observable counter adds the threads up
_SENT: dict[tuple[tuple[Any, ...], int], list[int]] = {}
_SENT_LOCK = threading.Lock()  # adding and removing cells, reading them all
_SENT_ATTRS: dict[tuple[Any, ...], dict[str, Any]] = {}


def is_instrumented() -> bool:
    return bool(_state)


def spans_enabled() -> bool:
    return bool(_state.get("spans"))


def instrument(tracer_provider: Any = None, meter_provider: Any = None, *, spans: bool = True) -> None:
    """Turn the instrumentation on (idempotent); providers default to the global ones. ``spans=False``:
    metrics only (no span per message, no context injected), for a bounded cost on pipelined sends."""
    if _state:
        return
    _, metrics, _, trace = api()
    from ..consumer import aio as caio
    from ..consumer.bound.core import BoundCore
    from ..consumer.core import ConsumerCore
    from ..consumer.engine import ConsumerEngine
    from ..producer import aio as paio
    from ..sync import producer as psync

    meter = metrics.get_meter("tubemq", schema_url=sc.SCHEMA_URL, meter_provider=meter_provider)
    _state.update(
        spans=spans, kinds=trace.SpanKind, attrs={},
        tracer=trace.get_tracer("tubemq", schema_url=sc.SCHEMA_URL, tracer_provider=tracer_provider),
        templates={},
        consumed=meter.create_counter(sc.CONSUMED_MESSAGES, unit="{message}",
                                      description="Number of messages that were delivered to the application."),
        duration=meter.create_histogram(sc.OPERATION_DURATION, unit="s",
                                        description="Duration of messaging operation initiated by a producer or "
                                                    "consumer client.",
                                        explicit_bucket_boundaries_advisory=list(sc.DURATION_BUCKETS)),
        process=meter.create_histogram(sc.PROCESS_DURATION, unit="s",
                                       description="Duration of processing operation.",
                                       explicit_bucket_boundaries_advisory=list(sc.DURATION_BUCKETS)),
    )
    meter.create_observable_counter(sc.SENT_MESSAGES, [_observe_sent], unit="{message}",
                                    description="Number of messages a producer attempted to send to the broker.")
    answered, pending = _wrap_answered, _wrap_pending
    plan = ((psync.Producer, "send", answered), (psync.Producer, "send_async", pending),
            (paio.Producer, "send", answered), (paio.Producer, "send_and_wait", answered),
            (paio.Producer, "send_async", pending), (paio.Producer, "send_nowait", pending),
            (ConsumerCore, "poll", _wrap_poll), (ConsumerEngine, "deliver", _wrap_deliver),
            (caio.Consumer, "subscribe", _wrap_subscribe), (BoundCore, "_fetch", _wrap_bound_fetch))
    originals = _state["originals"] = []
    for cls, name, wrap in plan:
        original = cls.__dict__[name]
        originals.append((cls, name, original))
        setattr(cls, name, wrap(original))


def uninstrument() -> None:
    """Restore the uninstrumented methods."""
    for cls, name, original in _state.get("originals", ()):
        setattr(cls, name, original)
    _state.clear()
    with _SENT_LOCK:
        _SENT.clear()
        _SENT_ATTRS.clear()
        _GEN[0] += 1


def _metric_attrs(*key: Any) -> dict[str, Any]:
    """The metric attributes of (operation, topic, group, host, port, error), built once per set."""
    cache = _state["attrs"]
    attrs = cache.get(key)
    if attrs is None:
        op, topic, group, host, port, error = key
        attrs = {sc.MESSAGING_SYSTEM: sc.SYSTEM, sc.OPERATION_NAME: op, sc.OPERATION_TYPE: op,
                 sc.DESTINATION: topic}
        if group is not None:
            attrs[sc.GROUP] = group
        if host is not None:
            attrs[sc.SERVER_ADDRESS] = host
            attrs[sc.SERVER_PORT] = port
        if error is not None:
            attrs[sc.ERROR_TYPE] = error
        if len(cache) >= _MAX_ATTR_SETS:
            cache.clear()
        cache[key] = attrs
    return attrs


def _observe_sent(options: Any) -> list[Any]:
    _, metrics, _, _ = api()
    totals: dict[tuple[Any, ...], int] = {}
    with _SENT_LOCK:
        for (key, _thread), cell in _SENT.items():
            totals[key] = totals.get(key, 0) + cell[0]
        return [metrics.Observation(n, _SENT_ATTRS[key]) for key, n in totals.items()]


class _Cells(threading.local):
    """This thread's counting cells by key (an attribute-set key, or a raw topic for the attempts of
    pipelined sends), valid while ``gen`` is the current :data:`_GEN`: a cell dropped from
    :data:`_SENT` (bounded) or :func:`uninstrument` makes every thread look its cells up again."""

    def __init__(self) -> None:
        self.gen = -1
        self.cells: dict[Any, list[int]] = {}


_LOCAL = _Cells()
_GEN = [0]


def _count_sent(key: tuple[Any, ...]) -> int:
    """Count one send under ``key``; returns this thread's count of that key (1 for its first)."""
    local = _LOCAL
    cell = local.cells.get(key) if local.gen == _GEN[0] else None
    if cell is None:
        cell = _new_cell(key, key)
    cell[0] += 1
    return cell[0]


def _new_cell(alias: Any, key: tuple[Any, ...]) -> list[int]:
    local = _LOCAL
    with _SENT_LOCK:
        if local.gen != _GEN[0]:
            local.cells, local.gen = {}, _GEN[0]
        cell = _SENT.get((key, threading.get_ident()))  # a thread that ended left it: go on counting
        if cell is None:
            if len(_SENT) >= _MAX_ATTR_SETS:  # bounded: the oldest cell starts over (a counter reset)
                del _SENT[next(iter(_SENT))]
                live = {k for k, _thread in _SENT}
                for stale in [k for k in _SENT_ATTRS if k not in live]:
                    del _SENT_ATTRS[stale]
                _GEN[0] += 1
                local.cells, local.gen = {}, _GEN[0]
            _SENT_ATTRS[key] = _metric_attrs(*key)
            cell = _SENT[(key, threading.get_ident())] = [0]
        local.cells[alias] = cell
        return cell


def _sampled(count: int) -> bool:
    """Whether the send counted ``count``-th (per key and thread) has its duration recorded: the
    first of each, then one in :data:`DURATION_SAMPLE`."""
    return count % DURATION_SAMPLE == 1


def _start_ns(t0: float) -> int:
    """Epoch nanoseconds of the monotonic instant ``t0`` (span start times are wall clock)."""
    return time.time_ns() - int((time.monotonic() - t0) * 1e9)


def _fail(span: Any, exc: BaseException) -> None:
    _, _, _, trace = api()
    span.record_exception(exc)
    span.set_status(trace.Status(trace.StatusCode.ERROR, str(exc)))
    span.set_attribute(sc.ERROR_TYPE, type(exc).__qualname__)


# ---------------------------------------------------------------------------------------- producer

class _Send:
    """One message being sent: its span (None: metrics only) and when the call started."""

    __slots__ = ("span", "t0", "topic", "counted")

    def __init__(self, topic: str, span: Any = None, counted: bool = False) -> None:
        self.topic = topic
        self.span = span
        self.counted = counted  # counted when it was made (a sampled metrics-only send)
        self.t0 = time.monotonic()

    def end(self, result: Any, exc: BaseException | None) -> None:
        host = port = error = None
        if exc is not None:
            error = type(exc).__qualname__
        elif result is not None:
            part = result.partition
            host, port = part.host, part.port
        span = self.span
        if span is not None:
            if exc is not None:
                _fail(span, exc)
            elif result is not None:
                span.set_attributes({sc.PARTITION: str(part.partition_id), sc.MESSAGE_ID: str(result.message_id),
                                     sc.SERVER_ADDRESS: str(host), sc.SERVER_PORT: int(port)})  # type: ignore[arg-type]
            span.end()
        key = ("send", self.topic, None, host, port, error)
        if self.counted or _sampled(_count_sent(key)):  # counted: sampled when it started
            _state["duration"].record(time.monotonic() - self.t0, _metric_attrs(*key))

    def __call__(self, result: Any, exc: BaseException | None) -> None:
        """The producer's ``callback(result, exc)``: on the client's loop thread, once (the op itself,
        not a bound method, so that a pending send holds one object less)."""
        if _state:
            self.end(result, exc)


def _send_template(client: Any, topic: Any) -> tuple[str, str, dict[str, Any]]:
    """(destination, span name, span attributes at start) of a client's sends to ``topic``, built once
    per (topic, client id): the SDK copies the attributes into each span."""
    client_id = getattr(client, "client_id", "")
    cache = _state["templates"]
    template = cache.get((topic, client_id))
    if template is None:
        name = topic.strip() if isinstance(topic, str) else str(topic)
        template = (name, f"send {name}", {
            sc.MESSAGING_SYSTEM: sc.SYSTEM, sc.OPERATION_TYPE: "send", sc.OPERATION_NAME: "send",
            sc.DESTINATION: name, sc.CLIENT_ID: str(client_id)})
        if len(cache) >= _MAX_ATTR_SETS:
            cache.clear()
        cache[(topic, client_id)] = template
    return template


def _start_send(client: Any, topic: Any, kwargs: dict[str, Any]) -> _Send:
    """A send starting: with spans, its ``send {topic}`` span and the context put in its attributes
    (unless the application set a ``traceparent`` itself: then it is kept and the span links to it)."""
    if not _state["spans"]:
        return _Send(topic.strip() if isinstance(topic, str) else str(topic))
    name, span_name, span_attrs = _send_template(client, topic)
    _, _, _, trace = api()
    attrs = kwargs.get("attributes")
    links = None
    own = attrs is not None and isinstance(attrs, Mapping) and TRACEPARENT in attrs
    if own:
        ctx = trace.get_current_span(extract_attributes(attrs)).get_span_context()
        links = [trace.Link(ctx)] if ctx.is_valid else None
    span = _state["tracer"].start_span(span_name, kind=trace.SpanKind.PRODUCER, links=links, attributes=span_attrs)
    if not own:
        kwargs["attributes"] = inject_span(attrs, span)
    return _Send(name, span)


def _wrap_answered(original: Callable[..., Any]) -> Callable[..., Any]:
    """A send that returns (or awaits to) the broker's answer: the span ends with the call."""
    if inspect.iscoroutinefunction(original):
        @functools.wraps(original)
        async def send_await(self: Any, topic: str, data: Any, **kwargs: Any) -> Any:
            if not _state:
                return await original(self, topic, data, **kwargs)
            op = _start_send(self, topic, kwargs)
            try:
                result = await original(self, topic, data, **kwargs)
            except BaseException as exc:
                op.end(None, exc)
                raise
            op.end(result, None)
            return result
        return send_await

    @functools.wraps(original)
    def send(self: Any, topic: str, data: Any, **kwargs: Any) -> Any:
        if not _state:
            return original(self, topic, data, **kwargs)
        op = _start_send(self, topic, kwargs)
        try:
            result = original(self, topic, data, **kwargs)
        except BaseException as exc:
            op.end(None, exc)
            raise
        op.end(result, None)
        return result
    return send


def _chain(op: _Send, user: Any) -> Callable[[Any, BaseException | None], None]:
    """The producer callback: ends ``op``, then calls the application's own callback (whose errors
    the producer logs as before)."""
    if user is None:
        return op

    def callback(result: Any, exc: BaseException | None) -> None:
        try:
            op(result, exc)
        finally:
            user(result, exc)
    return callback


def _metrics_only_send(topic: Any) -> _Send | None:
    """Metrics only, a send returning a future: counted now (an attempt, by destination); a sampled
    one (:func:`_sampled`) returns the op whose completion records its duration (with the broker and
    the outcome), the others nothing more, so a pipelined send costs about a dict update."""
    if type(topic) is str:  # looked up by the raw topic: no key to build
        local = _LOCAL
        cell = local.cells.get(topic) if local.gen == _GEN[0] else None
        if cell is None:
            cell = _new_cell(topic, ("send", topic.strip(), None, None, None, None))
        cell[0] += 1
        count = cell[0]
    else:
        count = _count_sent(("send", str(topic), None, None, None, None))
    if not _sampled(count):
        return None
    return _Send(topic.strip() if isinstance(topic, str) else str(topic), counted=True)


def _wrap_pending(original: Callable[..., Any]) -> Callable[..., Any]:
    """A send that returns a future: the span ends in the producer's completion callback (cheaper
    than a done-callback on the future, which the application may never wait for). A callback that
    is not callable goes to the producer unchanged, which refuses it."""
    if inspect.iscoroutinefunction(original):
        @functools.wraps(original)
        async def send_await(self: Any, topic: str, data: Any, **kwargs: Any) -> Any:
            user = kwargs.get("callback")
            if not _state or (user is not None and not callable(user)):
                return await original(self, topic, data, **kwargs)
            if _state["spans"]:
                op = _start_send(self, topic, kwargs)
            else:
                sampled = _metrics_only_send(topic)
                if sampled is None:
                    return await original(self, topic, data, **kwargs)
                op = sampled
            kwargs["callback"] = _chain(op, user)
            try:
                return await original(self, topic, data, **kwargs)
            except BaseException as exc:
                op.end(None, exc)
                raise
        return send_await

    @functools.wraps(original)
    def send(self: Any, topic: str, data: Any, **kwargs: Any) -> Any:
        user = kwargs.get("callback")
        if not _state or (user is not None and not callable(user)):
            return original(self, topic, data, **kwargs)
        if _state["spans"]:
            op = _start_send(self, topic, kwargs)
        else:
            sampled = _metrics_only_send(topic)
            if sampled is None:
                return original(self, topic, data, **kwargs)
            op = sampled
        kwargs["callback"] = _chain(op, user)
        try:
            return original(self, topic, data, **kwargs)
        except BaseException as exc:  # refused before it was queued: the callback will not run
            op.end(None, exc)
            raise
    return send


# ---------------------------------------------------------------------------------------- consumer

def _wrap_poll(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    async def poll(self: Any, timeout: float | None = None) -> Any:
        token = _POLL_START.set(time.monotonic())
        try:
            return await original(self, timeout)
        finally:
            _POLL_START.reset(token)
    return poll


def _wrap_deliver(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def deliver(self: Any, batch: Any) -> None:
        if not _state:
            return original(self, batch)
        start = _POLL_START.get()
        if start is None:  # a blocking iterator's own fetch: the receive started with its request
            start = batch.requested_at
        try:
            original(self, batch)
        except BaseException as exc:  # a value_deserializer error: the batch was rolled back
            _received(self, batch.partition, batch.messages, start, exc)
            raise
        _received(self, batch.partition, batch.messages, start, None)
    return deliver


def _wrap_bound_fetch(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    async def fetch(self: Any, p: Any, *args: Any, **kwargs: Any) -> Any:
        if not _state:
            return await original(self, p, *args, **kwargs)
        start = time.monotonic()
        try:
            batch = await original(self, p, *args, **kwargs)
        except Exception as exc:
            _received(self, p, [], start, exc)
            raise
        if batch is not None:
            _received(self, batch.partition, batch.messages, start, None)
        return batch
    return fetch


def _received(core: Any, part: Any, messages: list[Any], start: float, exc: BaseException | None) -> None:
    """A receive operation from ``start`` until now: its span (kind CLIENT), duration and count."""
    topic, group = part.topic, core.config.group
    error = type(exc).__qualname__ if exc is not None else None
    if _state["spans"]:
        _, _, _, trace = api()
        links = []
        for msg in messages:
            ctx = trace.get_current_span(extract(msg)).get_span_context()
            if ctx.is_valid:
                links.append(trace.Link(ctx))
        span = _state["tracer"].start_span(f"receive {topic}", kind=trace.SpanKind.CLIENT, links=links,
                                           start_time=_start_ns(start), attributes={
            sc.MESSAGING_SYSTEM: sc.SYSTEM, sc.OPERATION_TYPE: "receive", sc.OPERATION_NAME: "receive",
            sc.DESTINATION: topic, sc.GROUP: group, sc.PARTITION: str(part.partition_id),
            sc.BATCH_COUNT: len(messages), sc.CLIENT_ID: str(getattr(core, "client_id", "")),
            sc.SERVER_ADDRESS: str(part.host), sc.SERVER_PORT: int(part.port)})
        if exc is not None:
            _fail(span, exc)
        span.end()
    attrs = _metric_attrs("receive", topic, group, part.host, part.port, error)
    _state["duration"].record(time.monotonic() - start, attrs)
    if messages and exc is None:
        _state["consumed"].add(len(messages), attrs)


# ---------------------------------------------------------------------------------------- listeners

def _wrap_subscribe(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def subscribe(self: Any, listener: Callable[[Any], Any], *args: Any, **kwargs: Any) -> Any:
        if _state and callable(listener):
            listener = _processing(listener, self.config.group, self._core.client_id)
        return original(self, listener, *args, **kwargs)
    return subscribe


class _Process:
    """One listener call: a ``process {topic}`` span (kind CONSUMER) parented by the message's
    creation context (a batch: linked to each), current while the listener runs."""

    __slots__ = ("span", "token", "t0", "attrs")

    def __init__(self, item: Any, group: str, client_id: str) -> None:
        messages = list(item) if not hasattr(item, "attributes") else [item]
        part = getattr(item, "partition", None)
        topic = getattr(item, "topic", "") if messages else ""
        self.attrs = _metric_attrs("process", topic, group, None, None, None)
        self.span = self.token = None
        if _state["spans"]:
            context, _, _, trace = api()
            parent, links = None, []
            for msg in messages:
                ctx = extract(msg)
                sctx = trace.get_current_span(ctx).get_span_context()
                if sctx.is_valid:
                    links.append(trace.Link(sctx))
                    if len(messages) == 1:
                        parent = ctx
            attrs: dict[str, Any] = {
                sc.MESSAGING_SYSTEM: sc.SYSTEM, sc.OPERATION_TYPE: "process", sc.OPERATION_NAME: "process",
                sc.DESTINATION: topic, sc.GROUP: group, sc.CLIENT_ID: client_id,
                sc.BATCH_COUNT: len(messages)}
            if part is not None:
                attrs[sc.PARTITION] = str(part.partition_id)
            if len(messages) == 1:
                attrs[sc.MESSAGE_ID] = str(getattr(messages[0], "message_id", ""))
            self.span = _state["tracer"].start_span(f"process {topic}", context=parent,
                                                    kind=trace.SpanKind.CONSUMER, links=links, attributes=attrs)
            self.token = context.attach(trace.set_span_in_context(self.span))
        self.t0 = time.monotonic()

    def detach(self) -> None:
        if self.token is not None:
            context, _, _, _ = api()
            context.detach(self.token)
            self.token = None

    def end(self, exc: BaseException | None) -> None:
        self.detach()
        attrs = self.attrs
        if exc is not None:
            attrs = {**attrs, sc.ERROR_TYPE: type(exc).__qualname__}
        if self.span is not None:
            if exc is not None:
                _fail(self.span, exc)
            self.span.end()
        _state["process"].record(time.monotonic() - self.t0, attrs)


def _processing(listener: Callable[[Any], Any], group: str, client_id: str) -> Callable[[Any], Any]:
    """``listener`` inside a process span (coroutine listeners too)."""
    if inspect.iscoroutinefunction(listener):
        @functools.wraps(listener)
        async def process_async(item: Any) -> Any:
            if not _state:
                return await listener(item)
            op = _Process(item, group, client_id)
            try:
                result = await listener(item)
            except BaseException as exc:
                op.end(exc)
                raise
            op.end(None)
            return result
        return process_async

    @functools.wraps(listener)
    def process(item: Any) -> Any:
        if not _state:
            return listener(item)
        op = _Process(item, group, client_id)
        try:
            result = listener(item)
        except BaseException as exc:
            op.end(exc)
            raise
        if inspect.isawaitable(result):  # a plain function that returned a coroutine
            op.detach()
            return _finish(op, result)
        op.end(None)
        return result
    return process


async def _finish(op: _Process, awaitable: Any) -> Any:
    try:
        result = await awaitable
    except BaseException as exc:
        op.end(exc)
        raise
    op.end(None)
    return result


__all__ = ["instrument", "is_instrumented", "spans_enabled", "uninstrument"]
