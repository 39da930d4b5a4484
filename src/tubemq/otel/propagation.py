"""Trace context in TubeMQ message attributes: W3C headers, percent-encoded where TubeMQ needs it.

TubeMQ attribute values cannot hold ``,`` or ``=`` (the separators of the attribute text), which
``tracestate`` and ``baggage`` use: ``%`` -> ``%25``, ``,`` -> ``%2C``, ``=`` -> ``%3D``, ``$`` -> ``%24``
(the reserved ``$msgType$`` keys). ``traceparent`` has none of them and travels unchanged, so a consumer
in another language reads it as is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._imports import install_hint
from ..errors import TubeMQError

_ENCODE = {"%": "%25", ",": "%2C", "=": "%3D", "$": "%24"}
_DECODE = {v: k for k, v in _ENCODE.items()}
#: the attribute that marks a message whose creation context the application set itself
TRACEPARENT = "traceparent"


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


_API: list[Any] = []  # the modules, imported once (this runs per message)
_BAGGAGE: list[Any] = []  # opentelemetry.baggage, imported with them


def api() -> Any:
    """``(context, metrics, propagate, trace)`` of opentelemetry-api, or a TubeMQError naming the extra."""
    if _API:
        return _API[0]
    try:
        from opentelemetry import baggage, context, metrics, propagate, trace
    except ImportError as exc:  # pragma: no cover - the otel extra missing
        raise TubeMQError(f"OpenTelemetry is not installed: {install_hint('otel')}") from exc
    _BAGGAGE.append(baggage)
    _API.append((context, metrics, propagate, trace))
    return _API[0]


def inject(attributes: Mapping[str, Any] | None = None, context: Any = None) -> dict[str, Any]:
    """``attributes`` plus the current (or given) trace context, encoded for TubeMQ attributes."""
    _, _, propagate, _ = api()
    carrier: dict[str, Any] = dict(attributes or {})
    propagate.inject(carrier, context=context, setter=_SETTER)
    return carrier


#: (the global propagator last looked at, whether it writes only a plain ``traceparent`` for a span
#: without tracestate and baggage): the propagator is asked again when it is replaced
_TEXTMAP: list[tuple[Any, bool]] = [(None, False)]
_PROBE = (0x0AF7651916CD43DD8448EB211C80319C, 0xB7AD6B7169203331)


def _writes_traceparent_only(textmap: Any) -> bool:
    """Whether ``textmap`` injects a span without tracestate and baggage as ``traceparent`` alone, in
    the W3C format: the SDK's default (W3C trace context and baggage) does. Asked with a probe."""
    _, _, _, trace = api()
    from opentelemetry.context import Context
    try:
        if not set(textmap.fields) <= {TRACEPARENT, "tracestate", "baggage"}:
            return False
        probe = trace.NonRecordingSpan(trace.SpanContext(*_PROBE, is_remote=False,
                                                         trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED)))
        carrier: dict[str, str] = {}
        textmap.inject(carrier, context=trace.set_span_in_context(probe, Context()))
    except Exception:  # a propagator of the application's that cannot take the probe: the general way
        return False
    return carrier == {TRACEPARENT: _traceparent(*_PROBE, 1)}


def _traceparent(trace_id: int, span_id: int, flags: int) -> str:
    return f"00-{trace_id:032x}-{span_id:016x}-{flags:02x}"


def inject_span(attributes: Mapping[str, Any] | None, span: Any) -> dict[str, Any]:
    """:func:`inject` of the current context with ``span`` in it. With the default propagator and no
    tracestate or baggage to carry (a send's usual case) the ``traceparent`` is written directly: the
    same header, without the propagation API's context and carrier machinery."""
    _, _, propagate, trace = api()
    sctx = span.get_span_context()
    textmap = propagate.get_global_textmap()
    known = _TEXTMAP[0]
    if known[0] is not textmap:
        known = _TEXTMAP[0] = (textmap, _writes_traceparent_only(textmap))
    if known[1] and sctx.is_valid and not sctx.trace_state and not _baggage():
        carrier: dict[str, Any] = {} if attributes is None else dict(attributes)
        carrier[TRACEPARENT] = _traceparent(sctx.trace_id, sctx.span_id, sctx.trace_flags)
        return carrier
    return inject(attributes, trace.set_span_in_context(span))


def _baggage() -> Any:
    """The current baggage (after :func:`api`)."""
    return _BAGGAGE[0].get_all()


def extract_attributes(attributes: Mapping[str, str] | None) -> Any:
    """The OpenTelemetry ``Context`` carried by message attributes."""
    _, _, propagate, _ = api()
    return propagate.extract(attributes or {}, getter=_GETTER)


def extract(message: Any) -> Any:
    """The OpenTelemetry ``Context`` a message carries (from its producer), for a processing span:
    ``with tracer.start_as_current_span("process", context=tubemq.otel.extract(msg)): ...``."""
    return extract_attributes(getattr(message, "attributes", None))


__all__ = ["TRACEPARENT", "api", "decode_value", "encode_value", "extract", "extract_attributes", "inject"]
