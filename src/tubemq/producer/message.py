"""Message preparation: validation, the attribute text, and the job that carries a message.

Pure functions, run on the caller's thread (either API) before anything is queued: a bad message is
refused with a typed error before it takes a slot in the send buffer.
"""

from __future__ import annotations

import datetime as _dt
import logging
from collections.abc import Callable, Mapping
from typing import Any

from .. import codec
from ..errors import InvalidMessageError, MessageTooLargeError, TubeMQConnectionError, TubeMQTimeoutError
from ..protocol.constants import ARRAY_SEP, EQ, MAX_MAX_MSG_SIZE, TOKEN_MSG_TIME, TOKEN_MSG_TYPE, ErrorCode
from ..types import SendResult

log = logging.getLogger("tubemq.producer")

#: ``done(job, result, exc)``: how a job's owner learns its outcome (one long-lived callable per client).
Done = Callable[["Job", "SendResult | None", "BaseException | None"], None]
#: The user's per-message ``send_async(..., callback=)``: ``callback(result, None)`` or ``(None, exc)``.
SendCallback = Callable[["SendResult | None", "BaseException | None"], Any]


class Job:
    """One message on its way; ``done`` is called exactly once (the engine's ``settle`` sees to it)."""

    __slots__ = ("attempt", "cb", "deadline", "done", "finished", "flag", "fut", "key", "lane", "msg_time", "msg_type",
                 "now", "part", "payload", "size", "t0", "topic")

    def __init__(self, topic: str, payload: bytes, flag: int, size: int, msg_type: str | None,
                 msg_time: str | None, key: Any, done: Done | None) -> None:
        self.topic = topic
        self.payload = payload
        self.flag = flag
        self.size = size
        self.msg_type = msg_type
        self.msg_time = msg_time
        self.key = key
        self.done = done
        self.fut: Any = None  # whatever the owner resolves in ``done`` (a future, a waiter)
        self.cb: Any = None  # the per-message ``callback(result, exc)``, if any
        self.lane: Any = None  # the blocking API's per-thread order keeper (tubemq._bridge)
        self.part: codec.Partition | None = None
        self.attempt = 0
        self.t0 = 0.0  # when it was admitted
        self.deadline = 0.0  # when it must be settled by (the engine's start_clock)
        self.finished = False
        self.now = False  # someone awaits this one message: write it at once, not at the end of the loop round


def check_callback(callback: Any) -> SendCallback:
    if not callable(callback):
        raise InvalidMessageError(ErrorCode.BAD_REQUEST,
                                  f"callback must be callable(result, exc), not {type(callback).__name__}")
    return callback  # type: ignore[no-any-return]


def run_callback(job: Job, result: SendResult | None, exc: BaseException | None) -> None:
    """Call the job's user callback; its errors are logged, never propagated into the producer."""
    try:
        job.cb(result, exc)
    except Exception:
        log.exception("send_async callback %r raised for a message to topic %r (ignored)", job.cb, job.topic)


def _check_attr_text(what: str, value: str) -> str:
    value = str(value)
    if ARRAY_SEP in value or EQ in value or TOKEN_MSG_TYPE in value or TOKEN_MSG_TIME in value:
        raise InvalidMessageError(
            ErrorCode.BAD_REQUEST, f"attribute {what} {value!r} must not contain ',' '=' or the reserved $msg...$ keys"
        )
    return value


def format_msg_time(msg_time: Any) -> str | None:
    """``yyyyMMddHHmm`` in local time (Java's $msgTime$) from a datetime, epoch ms or that string."""
    if msg_time is None:
        return None
    if isinstance(msg_time, _dt.datetime):
        when = msg_time.astimezone() if msg_time.tzinfo is not None else msg_time
        return when.strftime("%Y%m%d%H%M")
    if isinstance(msg_time, (int, float)) and not isinstance(msg_time, bool):
        return _dt.datetime.fromtimestamp(msg_time / 1000.0).strftime("%Y%m%d%H%M")
    if isinstance(msg_time, str):
        text = msg_time.strip()
        if not text:
            return None
        try:
            if len(text) != 12:
                raise ValueError(text)
            _dt.datetime.strptime(text, "%Y%m%d%H%M")
        except ValueError:
            raise InvalidMessageError(
                ErrorCode.BAD_REQUEST, f"msg_time {msg_time!r} must be yyyyMMddHHmm (12 digits)"
            ) from None
        return text
    raise InvalidMessageError(
        ErrorCode.BAD_REQUEST, f"msg_time must be a datetime, epoch milliseconds or 'yyyyMMddHHmm', not {type(msg_time).__name__}"
    )


def prepare_message(
    topic: Any,
    data: Any,
    attributes: Mapping[str, Any] | None = None,
    stream_id: str | None = None,
    msg_time: Any = None,
) -> tuple[str, bytes, int, int, str | None, str | None]:
    """Validate and encode: (topic, payload, flag, java_size, msg_type, msg_time) (§4.6, §4.7).

    The attribute text is built like the Java ``Message``: user items, then ``putSystemHeader``
    puts ``$msgType$``/``$msgTime$`` first; the request's msgType/msgTime fields carry the same
    values (captures/s1). ``java_size`` = body + attribute length, what Java checks against the
    topic's max message size.
    """
    name = topic.strip() if isinstance(topic, str) else ""
    if not name:
        raise InvalidMessageError(ErrorCode.PARAMETER_MSG_TOPIC_BLANK, f"topic must be a non-blank string, got {topic!r}")
    topic = name
    # a wrong type is a programming error, not a refused message: TypeError, like any Python API
    if isinstance(data, str):
        raise TypeError("send(): argument 'data' must be bytes-like, not str (encode it, e.g. data.encode())")
    try:
        body = data if type(data) is bytes else bytes(memoryview(data))  # buffer protocol only (not int)
    except TypeError:
        raise TypeError(f"send(): argument 'data' must be bytes-like, not {type(data).__name__}") from None
    if not body:
        raise InvalidMessageError(ErrorCode.PARAMETER_MSG_BODY_EMPTY, "message body is empty")
    attr = ""
    if attributes:
        if not isinstance(attributes, Mapping):
            raise InvalidMessageError(ErrorCode.BAD_REQUEST, "attributes must be a mapping of str to str")
        items = []
        for k, v in attributes.items():
            k = _check_attr_text("key", k)
            if not k:
                raise InvalidMessageError(ErrorCode.BAD_REQUEST, "attribute keys must not be empty")
            items.append(f"{k}={_check_attr_text('value', '' if v is None else v)}")
        attr = ",".join(items)
    msg_type = None
    if stream_id is not None:
        if not isinstance(stream_id, str):
            raise InvalidMessageError(ErrorCode.BAD_REQUEST, "stream_id must be a str")
        msg_type = _check_attr_text("stream_id", stream_id).strip() or None
    mtime = None if msg_time is None else format_msg_time(msg_time)
    if msg_type is not None or mtime is not None:
        attr = codec.put_system_header(attr, msg_type, mtime)
    if attr:
        payload = codec.encode_payload(body, attr)
        flag = 1
        size = len(body) + len(attr)
    else:
        payload, flag, size = body, 0, len(body)
    if size > MAX_MAX_MSG_SIZE:
        raise MessageTooLargeError(
            ErrorCode.PARAMETER_MSG_OVER_MAX_LENGTH, f"message of {size} bytes is over the 20 MiB protocol limit"
        )
    return topic, payload, flag, size, msg_type, mtime


def make_job(topic: Any, data: Any, attributes: Mapping[str, Any] | None, stream_id: str | None,
             msg_time: Any, key: Any, done: Done | None,
             serialize: Callable[[str, Any, Any], tuple[Any, Any]] | None = None) -> Job:
    """Validate and encode a message into a job (any thread).

    ``serialize``: the producer's ``value_serializer`` / ``key_serializer`` (``ProducerConfig.serialize_hook``),
    applied first, so a serializer's bytes go through the same checks as any body.
    """
    if serialize is not None:
        data, key = serialize(topic.strip() if isinstance(topic, str) else str(topic), data, key)
    if type(data) is bytes and type(topic) is str and attributes is None and stream_id is None and msg_time is None:
        n = len(data)
        name = topic.strip()  # the common case, checked as prepare_message would (a plain body, no attributes)
        if name and 0 < n <= MAX_MAX_MSG_SIZE:
            return Job(name, data, 0, n, None, None, key, done)
    t, payload, flag, size, mtype, mtime = prepare_message(topic, data, attributes, stream_id, msg_time)
    return Job(t, payload, flag, size, mtype, mtime, key, done)


def with_context(exc: BaseException, job: Job, part: codec.Partition) -> BaseException:
    """Attach where the message was going (``exc.topic``, ``exc.partition``) for the caller.

    Connection-level errors are shared by every request of a connection: each job gets its own copy.
    """
    if isinstance(exc, (TubeMQTimeoutError, TubeMQConnectionError)):
        fresh = type(exc)(f"{exc} (topic {job.topic!r}, partition {part})")
        fresh.__cause__ = exc.__cause__
        exc = fresh
    try:
        exc.topic = job.topic  # type: ignore[attr-defined]
        exc.partition = part  # type: ignore[attr-defined]
    except AttributeError:
        pass
    return exc


__all__ = ["Done", "Job", "SendCallback", "check_callback", "format_msg_time", "make_job", "prepare_message",
           "run_callback", "with_context"]
