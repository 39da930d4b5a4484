"""OpenTelemetry instrumentation (the ``otel`` extra): spans, context propagation, metrics.

Off until :func:`instrument` is called, and zero cost then: nothing here is imported by the client,
``instrument()`` wraps the public send methods of both producers and the consumer's one delivery
point (``ConsumerEngine.deliver``, behind ``poll``, iteration (including a blocking iterator's own
fetches) and listeners of both APIs), like the
opentelemetry-instrumentation packages of other clients do; :func:`uninstrument` restores them.

* producer: a ``send {topic}`` span (kind PRODUCER) per message, ended when the broker answers,
  with the messaging semantic conventions (``messaging.system`` = ``tubemq``, destination, partition,
  message id, body size; ``error.type`` on failure); the current context is injected into the message
  attributes (W3C ``traceparent``, ``tracestate``, ``baggage``).
* consumer: a ``receive {topic}`` span (kind CONSUMER) per batch handed out, linked to the producer
  span of each message; :func:`extract` gives a message's context to parent your processing span.
* metrics (with a meter provider): ``messaging.client.sent.messages``,
  ``messaging.client.consumed.messages`` and ``messaging.client.operation.duration`` (s).

Attribute encoding: TubeMQ attribute values cannot hold ``,`` or ``=`` (they are the separators of the
attribute text), which ``tracestate`` and ``baggage`` use. Values are percent-encoded: ``%`` -> ``%25``,
``,`` -> ``%2C``, ``=`` -> ``%3D``, ``$`` -> ``%24`` (the reserved ``$msgType$`` keys); :func:`decode_value` reverses
it. ``traceparent`` has none of these characters and travels unchanged, so a non-Python consumer reads it as is.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping
from typing import Any

from ._extras import install_hint
from .errors import TubeMQError

SYSTEM = "tubemq"
_ENCODE = {"%": "%25", ",": "%2C", "=": "%3D", "$": "%24"}
_DECODE = {v: k for k, v in _ENCODE.items()}

_state: dict[str, Any] = {}  # tracer, meter instruments, originals: empty = not instrumented


def encode_value(value: str) -> str:
    """A propagation header value made safe for a TubeMQ attribute (see the module docstring)."""
    if not any(c in value for c in _ENCODE):
        return value
    return "".join(_ENCODE.get(c, c) for c in value)


def decode_value(value: str) -> str:
    """The reverse of :func:`encode_value` (other ``%xx`` sequences are left as they are)."""
    if "%" not in value:
        return value
    out, i = [], 0
    while i < len(value):
        chunk = value[i:i + 3]
        if chunk.upper() in _DECODE:
            out.append(_DECODE[chunk.upper()])
            i += 3
        else:
            out.append(value[i])
            i += 1
    return "".join(out)


class _Setter:
    def set(self, carrier: dict[str, str], key: str, value: str) -> None:
        carrier[key] = encode_value(value)


class _Getter:
    def get(self, carrier: Mapping[str, str], key: str) -> list[str] | None:
        value = carrier.get(key)
        return None if value is None else [decode_value(value)]

    def keys(self, carrier: Mapping[str, str]) -> list[str]:
        return list(carrier)


_SETTER, _GETTER = _Setter(), _Getter()


def _api() -> Any:
    try:
        from opentelemetry import context, metrics, propagate, trace
    except ImportError as exc:  # pragma: no cover - the otel extra missing
        raise TubeMQError(f"OpenTelemetry is not installed: {install_hint('otel')}") from exc
    return context, metrics, propagate, trace


def inject(attributes: Mapping[str, Any] | None = None, context: Any = None) -> dict[str, Any]:
    """``attributes`` plus the current (or given) trace context, encoded for TubeMQ attributes."""
    _, _, propagate, _ = _api()
    carrier: dict[str, Any] = dict(attributes or {})
    propagate.inject(carrier, context=context, setter=_SETTER)
    return carrier


def extract(message: Any) -> Any:
    """The OpenTelemetry ``Context`` a message carries (from its producer), for a processing span:
    ``with tracer.start_as_current_span("process", context=tubemq.otel.extract(msg)): ...``."""
    _, _, propagate, _ = _api()
    return propagate.extract(getattr(message, "attributes", None) or {}, getter=_GETTER)


def is_instrumented() -> bool:
    return bool(_state)


def instrument(tracer_provider: Any = None, meter_provider: Any = None) -> None:
    """Turn the instrumentation on (idempotent); providers default to the global ones."""
    if _state:
        return
    _, metrics, _, trace = _api()
    from .consumer.engine import ConsumerEngine
    from .producer import aio as paio
    from .producer import sync as psync

    tracer = trace.get_tracer("tubemq", tracer_provider=tracer_provider)
    meter = metrics.get_meter("tubemq", meter_provider=meter_provider)
    _state["tracer"] = tracer
    _state["sent"] = meter.create_counter("messaging.client.sent.messages", unit="{message}",
                                          description="messages sent (answered by the broker)")
    _state["consumed"] = meter.create_counter("messaging.client.consumed.messages", unit="{message}",
                                              description="messages handed to the application")
    _state["duration"] = meter.create_histogram("messaging.client.operation.duration", unit="s",
                                                description="send: from the call to the broker's answer")
    originals = _state["originals"] = []
    partial = functools.partial
    for cls, name, wrap in ((psync.Producer, "send", partial(_wrap_sync, finish=_send_answered)),
                            (psync.Producer, "send_async", partial(_wrap_sync, finish=_send_pending)),
                            (paio.Producer, "send", partial(_wrap_async, finish=_send_answered)),
                            (paio.Producer, "send_and_wait", partial(_wrap_async, finish=_send_answered)),
                            (paio.Producer, "send_async", partial(_wrap_async, finish=_send_pending)),
                            (paio.Producer, "send_nowait", partial(_wrap_sync, finish=_send_pending)),
                            (ConsumerEngine, "deliver", _wrap_deliver)):
        original = cls.__dict__[name]
        originals.append((cls, name, original))
        setattr(cls, name, wrap(original))


def uninstrument() -> None:
    """Restore the uninstrumented methods."""
    for cls, name, original in _state.get("originals", ()):
        setattr(cls, name, original)
    _state.clear()


# ---------------------------------------------------------------------------------------- producer

#: what a wrapped send does with what the producer method returned (``_send_answered``/``_send_pending``)
_Finish = Callable[[Any, float, Any, Any], None]


def _start_send(self: Any, topic: Any, kwargs: dict[str, Any]) -> tuple[Any, float]:
    _, _, _, trace = _api()
    name = topic.strip() if isinstance(topic, str) else str(topic)
    span = _state["tracer"].start_span(f"send {name}", kind=trace.SpanKind.PRODUCER, attributes={
        "messaging.system": SYSTEM, "messaging.operation.type": "send", "messaging.operation.name": "send",
        "messaging.destination.name": name, "messaging.client.id": str(getattr(self, "client_id", "")),
    })
    kwargs["attributes"] = inject(kwargs.get("attributes"), trace.set_span_in_context(span))
    return span, time.monotonic()


def _end_send(span: Any, t0: float, topic: Any, result: Any, exc: BaseException | None) -> None:
    _, _, _, trace = _api()
    attrs = {"messaging.system": SYSTEM, "messaging.operation.name": "send",
             "messaging.destination.name": str(topic).strip()}
    if exc is not None:
        span.record_exception(exc)
        span.set_status(trace.Status(trace.StatusCode.ERROR, str(exc)))
        span.set_attribute("error.type", type(exc).__name__)
        attrs["error.type"] = type(exc).__name__
    elif result is not None:
        part = result.partition
        span.set_attribute("messaging.destination.partition.id", str(part.partition_id))
        span.set_attribute("messaging.message.id", str(result.message_id))
        span.set_attribute("server.address", str(part.host))
        span.set_attribute("server.port", int(part.port))
        _state["sent"].add(1, attrs)
    span.end()
    _state["duration"].record(time.monotonic() - t0, attrs)


def _send_answered(span: Any, t0: float, topic: Any, result: Any) -> None:
    """A send that returned the broker's answer: its span ends now."""
    _end_send(span, t0, topic, result, None)


def _send_pending(span: Any, t0: float, topic: Any, fut: Any) -> None:
    """A send that returned a future: its span ends when the future does."""
    fut.add_done_callback(_on_done(span, t0, topic))


def _on_done(span: Any, t0: float, topic: Any) -> Callable[[Any], None]:
    def done(fut: Any) -> None:
        if fut.cancelled():
            _end_send(span, t0, topic, None, TubeMQError("send cancelled"))
            return
        exc = fut.exception()
        _end_send(span, t0, topic, None if exc else fut.result(), exc)
    return done


def _wrap_sync(original: Callable[..., Any], finish: _Finish) -> Callable[..., Any]:
    """A producer method that returns at once: ``finish`` gets what it returned."""
    @functools.wraps(original)
    def send(self: Any, topic: str, data: Any, **kwargs: Any) -> Any:
        span, t0 = _start_send(self, topic, kwargs)
        try:
            result = original(self, topic, data, **kwargs)
        except BaseException as exc:
            _end_send(span, t0, topic, None, exc)
            raise
        finish(span, t0, topic, result)
        return result
    return send


def _wrap_async(original: Callable[..., Any], finish: _Finish) -> Callable[..., Any]:
    """A coroutine producer method: ``finish`` gets what it awaited to."""
    @functools.wraps(original)
    async def send(self: Any, topic: str, data: Any, **kwargs: Any) -> Any:
        span, t0 = _start_send(self, topic, kwargs)
        try:
            result = await original(self, topic, data, **kwargs)
        except BaseException as exc:
            _end_send(span, t0, topic, None, exc)
            raise
        finish(span, t0, topic, result)
        return result
    return send


# ---------------------------------------------------------------------------------------- consumer

def _wrap_deliver(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def deliver(self: Any, batch: Any) -> None:
        original(self, batch)  # a value_deserializer error rolls the batch back: no receive span then
        if _state:
            _record_receive(self, batch)
    return deliver


def _record_receive(core: Any, batch: Any) -> None:
    _, _, _, trace = _api()
    messages = list(batch)
    links = []
    for msg in messages:
        ctx = trace.get_current_span(extract(msg)).get_span_context()
        if ctx.is_valid:
            links.append(trace.Link(ctx))
    topic = messages[0].topic if messages else ""
    part = getattr(batch, "partition", None)
    group = getattr(core.config, "group", "")
    attrs: dict[str, Any] = {
        "messaging.system": SYSTEM, "messaging.operation.type": "receive", "messaging.operation.name": "receive",
        "messaging.destination.name": topic, "messaging.consumer.group.name": group,
        "messaging.batch.message_count": len(messages), "messaging.client.id": str(getattr(core, "client_id", "")),
    }
    if part is not None:
        attrs["messaging.destination.partition.id"] = str(part.partition_id)
    span = _state["tracer"].start_span(f"receive {topic}", kind=trace.SpanKind.CONSUMER, links=links,
                                       attributes=attrs)
    span.end()
    _state["consumed"].add(len(messages), {"messaging.system": SYSTEM, "messaging.destination.name": topic,
                                           "messaging.consumer.group.name": group})


__all__ = ["SYSTEM", "decode_value", "encode_value", "extract", "inject", "instrument", "is_instrumented",
           "uninstrument"]
