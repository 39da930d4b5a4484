"""Value (and routing-key) serializers: ``value_serializer=`` / ``value_deserializer=``.

TubeMQ carries bytes; Kafka users expect the client to turn objects into bytes and back. A
serializer is any callable ``obj -> bytes``, a deserializer any callable ``bytes -> obj``, or one of
the named codecs below (``"json"``, ``"str"``, ``"bytes"``), which are both at once. Resolving
happens once, when the client's config is built, so a send without serializers costs nothing.

Errors raised by a user's callable (or a JSON value that cannot be encoded / decoded) become
:class:`tubemq.errors.SerializationError` with the original exception chained.
"""

from __future__ import annotations

import json as _json
from collections.abc import Callable
from typing import Any

from .errors import ConfigError, SerializationError

Serializer = Callable[[Any], bytes]
Deserializer = Callable[[bytes], Any]


class Codec:
    """A named pair: ``serialize(obj) -> bytes`` and ``deserialize(bytes) -> obj``.

    Pass the codec itself (``tubemq.serializers.json``) or its name (``"json"``) as
    ``value_serializer`` / ``value_deserializer``.
    """

    def __init__(self, name: str, serialize: Serializer, deserialize: Deserializer) -> None:
        self.name = name
        self.serialize = serialize
        self.deserialize = deserialize

    def __repr__(self) -> str:
        return f"<tubemq.serializers.{self.name}>"


def _json_dumps(obj: Any) -> bytes:
    return _json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")


def _json_loads(data: bytes) -> Any:
    return _json.loads(data)


def _str_encode(obj: Any) -> bytes:
    if not isinstance(obj, str):
        raise TypeError(f"the 'str' serializer takes str, not {type(obj).__name__}")
    return obj.encode("utf-8")


def _str_decode(data: bytes) -> str:
    return bytes(data).decode("utf-8")


def _identity(obj: Any) -> Any:
    return obj


#: UTF-8 JSON (compact; NaN and Infinity refused, as JSON has no such values)
json = Codec("json", _json_dumps, _json_loads)
#: UTF-8 text
string = Codec("str", _str_encode, _str_decode)
#: bytes as they are (the default behaviour, named for symmetry)
raw = Codec("bytes", _identity, _identity)

CODECS: dict[str, Codec] = {"json": json, "str": string, "utf-8": string, "bytes": raw}


def resolve(field: str, value: Any, direction: str) -> Callable[[Any], Any] | None:
    """The callable for ``value`` (None, a name, a :class:`Codec`, an object with ``serialize`` /
    ``deserialize``, or a callable); ``direction`` is ``"serialize"`` or ``"deserialize"``.

    A wrong value is a :class:`~tubemq.errors.ConfigError` naming ``field``.
    """
    if value is None:
        return None
    if isinstance(value, str):
        codec = CODECS.get(value.strip().lower())
        if codec is None:
            raise ConfigError(field, f"unknown serializer {value!r} (known: {', '.join(sorted(CODECS))}, "
                              "or any callable)")
        value = codec
    method = getattr(value, direction, None)
    if callable(method):
        return method  # type: ignore[no-any-return]
    if callable(value):
        return value  # type: ignore[no-any-return]
    raise ConfigError(field, f"must be a callable, a codec name or an object with .{direction}(), "
                      f"got {type(value).__name__}")


def apply(fn: Callable[[Any], Any], value: Any, what: str, topic: str) -> Any:
    """``fn(value)``, its failure as a SerializationError that says what and where."""
    try:
        return fn(value)
    except Exception as exc:
        raise SerializationError(f"{what} of a message for topic {topic!r} failed: "
                                 f"{type(exc).__name__}: {exc}", topic=topic) from exc


def deserialize_messages(messages: Any, fn: Callable[[Any], Any]) -> None:
    """Replace each message's ``data`` with ``fn(data)`` (the consumer's ``value_deserializer``).

    Raises SerializationError (``.message``: the message, still holding its bytes) at the first
    failure; the caller rolls the batch back, so nothing is lost.
    """
    for msg in messages:
        try:
            msg.data = fn(msg.data)
        except Exception as exc:
            raise SerializationError(
                f"value_deserializer failed on message {msg.message_id} of {msg.partition} "
                f"(topic {msg.topic!r}): {type(exc).__name__}: {exc}; its batch was rolled back for re-delivery",
                topic=msg.topic, message=msg) from exc


__all__ = ["CODECS", "Codec", "Deserializer", "Serializer", "apply", "deserialize_messages", "json", "raw", "resolve", "string"]
