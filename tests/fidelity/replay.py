"""Replay the REAL master's and broker's recorded answers to our clients (captures/*.json).

The captures hold the exact bytes a real Apache InLong TubeMQ master and broker wrote to the official
Java client. :class:`ReplayServer` is a small scripted TCP server on 127.0.0.1 that answers our
client's requests with those bytes, only the frame serial rewritten (bytes 4..8 of the frame). Where
the real answer names something that differs in our run (the broker's address, the Java client's id
inside an event), the answer is decoded, the strings are replaced field by field and the message is
re-encoded: the tests in test_capture_bytes.py check that re-encoding reproduces the captured bytes.

Every request our client sends is decoded and logged (:class:`Seen`) so a test can compare it with
what the Java client sent in the same situation (:func:`shape`, :func:`java_requests`).
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from _data import load_capture
from _support.wire import MESSAGES

from tubemq import codec
from tubemq.server import wire

# --------------------------------------------------------------------------------------------------
# the recordings


@dataclass
class CapFrame:
    """One recorded frame: who wrote it, its exact bytes and the capture tool's decoding."""

    t_ms: float
    direction: str
    conn_id: int
    serial: int
    raw: bytes
    method: int | None
    message: dict[str, Any]
    truncated: bool
    status: str | None
    exception: dict[str, Any] | None

    @property
    def is_request(self) -> bool:
        return self.direction in ("c2m", "c2b")


@dataclass
class Capture:
    name: str
    frames: list[CapFrame]
    doc: dict[str, Any]

    def answer_to(self, request: CapFrame) -> CapFrame:
        """The server frame that answered ``request`` (same connection and serial, later)."""
        want = "m2c" if request.direction == "c2m" else "b2c"
        for f in self.frames:
            if f.direction == want and f.conn_id == request.conn_id and f.serial == request.serial \
                    and f.t_ms >= request.t_ms:
                return f
        raise LookupError(f"{self.name}: no answer to {request.direction} serial {request.serial}")

    def requests(self, method: int, *, conn: int | None = None, **match: Any) -> list[CapFrame]:
        """Client frames of ``method`` (optionally on one connection, with matching message fields)."""
        return [f for f in self.frames if f.is_request and f.method == method
                and (conn is None or f.conn_id == conn)
                and all(f.message.get(k) == v for k, v in match.items())]

    def answers(self, method: int, *, conn: int | None = None, **match: Any) -> list[CapFrame]:
        """The answers to :meth:`requests`, in order."""
        return [self.answer_to(r) for r in self.requests(method, conn=conn, **match)]


@cache
def load(name: str) -> Capture:
    doc = load_capture(name)
    frames = []
    for f in doc["frames"]:
        dec = f.get("decoded", {})
        hdr = dec.get("response_header") or {}
        frames.append(CapFrame(
            t_ms=f["t_ms"], direction=f["direction"], conn_id=f["conn_id"], serial=f["serial"],
            raw=bytes.fromhex(f["hex"]), method=dec.get("method"), message=dec.get("message") or {},
            truncated=bool(f.get("hex_truncated")), status=hdr.get("status"),
            exception=dec.get("rsp_exception_body"),
        ))
    return Capture(name, frames, doc)


# --------------------------------------------------------------------------------------------------
# answers built from recorded bytes


def with_serial(raw: bytes, serial: int) -> bytes:
    """The recorded frame with only its serial number replaced (frame bytes 4..8)."""
    return raw[:4] + serial.to_bytes(4, "big") + raw[8:]


def _repeated(fd: Any) -> bool:
    return bool(fd.is_repeated) if hasattr(fd, "is_repeated") else fd.label == fd.LABEL_REPEATED


def _sub_text(text: str, subs: Mapping[str, str]) -> str:
    for old, new in subs.items():
        text = text.replace(old, new)
    return text


def substitute(msg: Any, subs: Mapping[str, str]) -> None:
    """Replace substrings in every string field of ``msg`` (recursively, repeated fields included)."""
    for fd, value in list(msg.ListFields()):
        repeated = _repeated(fd)
        if fd.type == fd.TYPE_MESSAGE:
            for sub in (value if repeated else [value]):
                substitute(sub, subs)
        elif fd.type == fd.TYPE_STRING:
            if repeated:
                new = [_sub_text(v, subs) for v in value]
                del value[:]
                value.extend(new)
            else:
                setattr(msg, fd.name, _sub_text(value, subs))


def decode_answer(frame: CapFrame) -> Any:
    """The response message of a recorded success answer (protobuf object)."""
    payload = _payload(frame.raw)
    rsp = codec.decode_response(payload)
    assert rsp.status == 0, f"not a success answer: {rsp}"
    assert frame.method is not None
    return MESSAGES[frame.method][1].FromString(rsp.body)


def _payload(raw: bytes) -> bytes:
    frames = codec.FrameDecoder().feed(raw)
    assert len(frames) == 1, "a recorded frame holds exactly one frame"
    return frames[0][1]


def answer(frame: CapFrame, serial: int, subs: Mapping[str, str] | None = None,
           edit: Callable[[Any], None] | None = None) -> bytes:
    """The recorded answer for our request ``serial``: raw bytes, or re-encoded after substitutions
    (only when a substituted string really occurs) or after ``edit(message)``."""
    if frame.truncated:
        raise ValueError("truncated frames cannot be replayed")
    needs = edit is not None or (subs and any(old.encode() in frame.raw for old in subs))
    if not needs:
        return with_serial(frame.raw, serial)
    msg = decode_answer(frame)
    if subs:
        substitute(msg, subs)
    if edit is not None:
        edit(msg)
    assert frame.method is not None
    return wire.encode_response(serial, frame.method, msg.SerializeToString())


# --------------------------------------------------------------------------------------------------
# the scripted server


@dataclass
class Seen:
    """One request our client sent, decoded."""

    t: float
    conn: int
    serial: int
    service_type: int
    protocol_ver: int
    method: int
    timeout: int | None
    msg: Any

    @property
    def fields(self) -> dict[str, Any]:
        return to_dict(self.msg)


#: script(seen) -> frames to write back (bytes or list of bytes), None for no answer, or an awaitable
Script = Callable[[Seen], "bytes | list[bytes] | None | Awaitable[bytes | list[bytes] | None]"]


class ReplayServer:
    """A TubeMQ-framed TCP server on 127.0.0.1 answering through ``script``; logs every request."""

    def __init__(self, name: str, script: Script | None = None) -> None:
        self.name = name
        self.script = script
        self.log: list[Seen] = []
        self.server: asyncio.AbstractServer | None = None
        self.port = 0
        self.connections = 0
        self.writers: list[asyncio.StreamWriter] = []
        self._tasks: set[asyncio.Task[Any]] = set()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def start(self, port: int = 0) -> ReplayServer:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", port)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    def requests(self, method: int | None = None) -> list[Seen]:
        return [s for s in self.log if method is None or s.method == method]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        conn = self.connections
        self.writers.append(writer)
        dec = codec.FrameDecoder()
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                for serial, payload in dec.feed(data):
                    req = wire.decode_request(payload)
                    req_cls = MESSAGES[req.method][0]
                    seen = Seen(time.monotonic(), conn, serial, req.service_type, req.protocol_ver, req.method,
                                req.timeout, req_cls.FromString(req.body))
                    self.log.append(seen)
                    out = self.script(seen) if self.script is not None else None
                    if asyncio.iscoroutine(out) or isinstance(out, asyncio.Future):
                        task = asyncio.ensure_future(self._later(out, writer))
                        self._tasks.add(task)
                        task.add_done_callback(self._tasks.discard)
                        continue
                    _write(writer, out)
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def _later(self, out: Awaitable[Any], writer: asyncio.StreamWriter) -> None:
        frames = await out
        if not writer.is_closing():
            _write(writer, frames)

    async def drop_clients(self) -> None:
        for w in self.writers:
            w.transport.abort()
        self.writers.clear()

    async def close(self) -> None:
        """Stop listening and cut every connection (a broker that disappears)."""
        if self.server is not None:
            self.server.close()
        await self.drop_clients()
        for t in list(self._tasks):
            t.cancel()
        if self.server is not None:
            await self.server.wait_closed()
            self.server = None


def _write(writer: asyncio.StreamWriter, out: bytes | list[bytes] | None) -> None:
    if out is None:
        return
    for frame in ([out] if isinstance(out, bytes) else out):
        writer.write(frame)


class Sequence:
    """Hands out recorded answers in order; the last one repeats when they run out."""

    def __init__(self, frames: Iterable[CapFrame]) -> None:
        self.frames = list(frames)
        assert self.frames, "empty answer sequence"
        self.used = 0

    def next(self) -> CapFrame:
        frame = self.frames[min(self.used, len(self.frames) - 1)]
        self.used += 1
        return frame


# --------------------------------------------------------------------------------------------------
# comparing requests


def to_dict(msg: Any) -> dict[str, Any]:
    """Fields present on the wire, in the capture tool's layout (bytes as {len, sha256})."""
    out: dict[str, Any] = {}
    for fd, value in msg.ListFields():
        repeated = _repeated(fd)
        if fd.type == fd.TYPE_MESSAGE:
            out[fd.name] = [to_dict(v) for v in value] if repeated else to_dict(value)
        elif fd.type == fd.TYPE_BYTES:
            out[fd.name] = {"len": len(value), "sha256": hashlib.sha256(value).hexdigest()}
        else:
            out[fd.name] = list(value) if repeated else value
    return out


def java_dict(message: Mapping[str, Any]) -> dict[str, Any]:
    """A captured message without the capture tool's derived keys ('_...'), bytes as {len, sha256}."""
    out: dict[str, Any] = {}
    for k, v in message.items():
        if k.startswith("_"):
            continue
        if isinstance(v, Mapping) and "len" in v and "hex_prefix" in v:
            sha = v.get("sha256")
            if sha is None and v["len"] <= 64:
                sha = hashlib.sha256(bytes.fromhex(v["hex_prefix"])).hexdigest()
            out[k] = {"len": v["len"], "sha256": sha}
        elif isinstance(v, Mapping):
            out[k] = java_dict(v)
        elif isinstance(v, list) and v and isinstance(v[0], Mapping):
            out[k] = [java_dict(x) for x in v]
        else:
            out[k] = v
    return out


def shape(d: Mapping[str, Any], prefix: str = "") -> set[str]:
    """Names of the fields present (nested as ``parent.child``)."""
    names: set[str] = set()
    for k, v in d.items():
        names.add(prefix + k)
        if isinstance(v, Mapping) and "sha256" not in v:
            names |= shape(v, prefix + k + ".")
    return names


def diff(ours: Mapping[str, Any], java: Mapping[str, Any], ignore: Iterable[str] = ()) -> dict[str, Any]:
    """Field-by-field differences (``{name: (ours, java)}``), ignoring the named top-level fields."""
    skip = set(ignore)
    out = {}
    for k in set(ours) | set(java):
        if k in skip:
            continue
        if ours.get(k, "<absent>") != java.get(k, "<absent>"):
            out[k] = (ours.get(k, "<absent>"), java.get(k, "<absent>"))
    return out


@dataclass
class Deadline:
    """Bounded polling for async tests."""

    seconds: float
    start: float = field(default_factory=time.monotonic)

    async def until(self, cond: Callable[[], Any], what: str = "") -> Any:
        while True:
            value = cond()
            if value:
                return value
            if time.monotonic() - self.start > self.seconds:
                raise AssertionError(f"timed out after {self.seconds} s waiting for {what or cond}")
            await asyncio.sleep(0.01)


def run(coro: Awaitable[Any], timeout: float = 60.0) -> Any:
    """Run an async test body with a hard deadline."""

    async def main() -> Any:
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(main())
