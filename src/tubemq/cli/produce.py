"""``tubemq produce``: send a file (or stdin) to a topic, pipelined, with a progress bar and a summary.

Formats: ``lines`` (one message per line, the newline removed; empty lines skipped), ``jsonl`` (the
same, but each line must be valid JSON), ``envelope`` (JSON lines as written by ``tubemq consume
--format json``: data/data_b64 + attributes + stream_id, so a topic round-trips through a file) and
``raw`` (the whole input is one message), ``inlongmsg`` (lines packed into InLong containers, one
record per line). Ctrl-C stops reading, waits for what is in flight and
reports acknowledged vs not (a second Ctrl-C abandons the wait).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections.abc import Iterator
from typing import IO, Any

from . import inlong
from .common import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    CliError,
    check_reachable,
    eprint,
    open_client,
    parse_attrs,
    plain,
    resolve_target,
)
from .output import envelope_fields, format_table
from .pipeline import ReadGuard, ReadInterrupted, SendPipeline, StopFlag, sigint_stops
from .progress import ProgressBar, format_bytes, format_count

HELP = "send the lines / JSON lines / raw bytes of a file or stdin to a topic"

#: After a second Ctrl-C, how long the producer may take to close before we exit without it.
_ABANDON_CLOSE_WAIT = 0.5

#: How much of the input start is checked for binary content in the line formats.
_TEXT_CHECK = 64 * 1024
_TEXT_FORMATS = ("lines", "jsonl", "envelope")

#: Upper bound of one line we buffer (the broker's hard cap is far lower; this just bounds memory).
MAX_LINE = 64 * 1024 * 1024


def register(sub: Any) -> None:
    p = sub.add_parser("produce", help=HELP, description=HELP + ". " + plain((__doc__ or "").split("\n\n", 1)[1]))
    p.add_argument("file", nargs="?", default="-", help="input file, or - for stdin (default)")
    p.add_argument("--topic", "-t", required=True)
    p.add_argument("--master", "-m", default=None, help="master HOST:PORT[,HOST:PORT] (default: local server)")
    p.add_argument("--format", "-f", choices=("lines", "jsonl", "envelope", "raw", "inlongmsg"), default="lines")
    p.add_argument("--delimiter", default="\\n", help="record separator for lines/jsonl (default \\n)")
    p.add_argument("--binary", action="store_true",
                   help="split binary input (NUL bytes, not UTF-8) into records anyway (default: refuse)")
    p.add_argument("--attr", "-a", action="append", metavar="KEY=VALUE", help="attribute on every message (repeat)")
    p.add_argument("--stream-id", default=None, help="stream id ($msgType$) of every message (consumer filters)")
    p.add_argument("--inflight", type=int, default=1000, help="max unacknowledged messages (default 1000)")
    p.add_argument("--limit", type=int, default=None, help="stop after this many messages")
    p.add_argument("--keep-going", action="store_true", help="keep sending after a failed message")
    p.add_argument("--drain-timeout", type=float, default=30.0, help="seconds to wait for in-flight acks at the end")
    p.add_argument("--progress", dest="progress", action="store_true", default=None, help="force the progress bar")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="never draw the progress bar")
    p.add_argument("-X", "--option", action="append", metavar="KEY=VALUE",
                   help="client option, e.g. -X rpc_timeout_ms=5000 -X retries=5 (any ProducerConfig field)")
    p.add_argument("--json-summary", action="store_true", help="print the summary as JSON on stdout")
    inlong.add_produce_arguments(p)
    p.set_defaults(func=run)


def _delimiter(text: str) -> bytes:
    try:
        value = text.encode("utf-8").decode("unicode_escape").encode("latin-1")
    except (UnicodeDecodeError, UnicodeEncodeError):
        raise CliError(f"bad --delimiter {text!r}", EXIT_USAGE) from None
    if not value:
        raise CliError("--delimiter cannot be empty", EXIT_USAGE)
    return value


def split_records(stream: IO[bytes], delimiter: bytes) -> Iterator[bytes]:
    """Yield the records of a binary stream separated by ``delimiter`` (the last may lack it)."""
    if delimiter == b"\n":
        for line in stream:
            if line.endswith(b"\n"):
                line = line[:-1]
            yield line
        return
    buf = b""
    while True:
        chunk = stream.read(1 << 20)
        if not chunk:
            break
        buf += chunk
        parts = buf.split(delimiter)
        buf = parts.pop()
        yield from parts
        if len(buf) > MAX_LINE:
            raise CliError(f"a record is longer than {MAX_LINE} bytes without a delimiter")
    if buf:
        yield buf


def check_text(head: bytes, where: str) -> None:
    """Refuse input that looks binary in a line-based format: it would be cut at arbitrary 0x0A bytes.

    ``head`` is the start of the input (what is buffered, up to 64 KiB). A NUL byte or invalid UTF-8
    (a multi-byte sequence cut off at the end of ``head`` is fine) makes it binary.
    """
    import codecs

    nul = head.find(b"\0")
    if nul >= 0:
        why = f"a NUL byte at offset {nul}"
    else:
        try:
            codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
            return
        except UnicodeDecodeError as exc:
            why = f"invalid UTF-8 at offset {exc.start}"
    raise CliError(f"{where} looks binary ({why}): line mode would split it at newline bytes; "
                   "send it as one message with --format raw, or pass --binary to split it anyway")


def _check_input(args: argparse.Namespace, stream: IO[bytes]) -> None:
    if args.format in _TEXT_FORMATS and not args.binary:
        peek = getattr(stream, "peek", None)  # buffered files and stdin: look without consuming
        head = peek(_TEXT_CHECK)[:_TEXT_CHECK] if peek is not None else b""
        check_text(head, "stdin" if args.file == "-" else args.file)


def _open_input(path: str) -> IO[bytes]:
    if path == "-":
        return sys.stdin.buffer
    try:
        return open(path, "rb")  # noqa: SIM115 - closed by the caller
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror or exc}") from None


def _count_records(path: str, delimiter: bytes) -> int | None:
    """Total for the progress bar: cheap for files (a byte count scan), unknown for stdin."""
    if path == "-":
        return None
    try:
        n = 0
        last = b""
        with open(path, "rb") as f:
            while chunk := f.read(1 << 22):
                n += chunk.count(delimiter)
                last = chunk
        if last and not last.endswith(delimiter):
            n += 1
        return n
    except OSError:
        return None


class _Counters:
    skipped = 0
    invalid = 0


def _records(args: argparse.Namespace, stream: IO[bytes], delimiter: bytes, attrs: dict[str, str],
             counters: _Counters) -> Iterator[tuple[bytes, dict[str, str], str | None]]:
    """(data, attributes, stream_id) per message of the input, in input order."""
    if args.format == "inlongmsg":
        as_lines = argparse.Namespace(**{**vars(args), "format": "lines"})
        yield from inlong.pack_containers(args, _records(as_lines, stream, delimiter, attrs, counters))
        return
    if args.format == "raw":
        data = stream.read(MAX_LINE + 1)
        if len(data) > MAX_LINE:
            raise CliError(f"raw input larger than {MAX_LINE} bytes")
        if data:
            yield data, attrs, args.stream_id
        else:
            counters.skipped += 1
        return
    if args.file == "-":
        _check_input(args, stream)
    for lineno, record in enumerate(split_records(stream, delimiter), 1):
        if delimiter == b"\n" and record.endswith(b"\r"):
            record = record[:-1]
        if not record.strip():
            counters.skipped += 1  # the broker refuses empty messages (400)
            continue
        if args.format == "jsonl":
            try:
                json.loads(record)
            except ValueError as exc:
                counters.invalid += 1
                if not args.keep_going:
                    raise CliError(f"{args.file}:{lineno}: not valid JSON ({exc})") from None
                continue
            yield record, attrs, args.stream_id
        elif args.format == "envelope":
            try:
                data, env_attrs, env_stream = envelope_fields(record)
            except (ValueError, TypeError) as exc:
                counters.invalid += 1
                if not args.keep_going:
                    raise CliError(f"{args.file}:{lineno}: bad envelope ({exc})") from None
                continue
            yield data, {**_user_attrs(env_attrs), **attrs}, args.stream_id or env_stream
        else:
            yield record, attrs, args.stream_id


def run(args: argparse.Namespace) -> int:
    if args.inflight < 1:
        raise CliError("--inflight must be at least 1", EXIT_USAGE)
    if args.limit is not None and args.limit < 0:
        raise CliError("--limit must be >= 0", EXIT_USAGE)
    inlong.check_produce_arguments(args)
    attrs = parse_attrs(args.attr)
    delimiter = _delimiter(args.delimiter)
    master, target = resolve_target(args.master, args.option)
    stream = _open_input(args.file)
    try:
        if args.file != "-":
            _check_input(args, stream)  # a file: before connecting (stdin: at its first read)
        check_reachable(master)
        return _produce(args, target, stream, delimiter, attrs)
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()


def _produce(args: argparse.Namespace, target: str, stream: IO[bytes], delimiter: bytes,
             attrs: dict[str, str]) -> int:
    from tubemq import Producer

    total = None
    if args.format == "raw":
        total = 1
    elif args.progress is not False and args.format != "inlongmsg":  # containers: unknown in advance
        total = _count_records(args.file, delimiter)
    if total is not None and args.limit is not None:
        total = min(total, args.limit)
    producer = open_client(Producer, target)
    bar = ProgressBar(total, f"produce {args.topic}", enabled=args.progress)
    stop = StopFlag()
    counters = _Counters()
    abandoned = False
    t0 = time.monotonic()
    pipe = SendPipeline(producer, args.topic, inflight=args.inflight, bar=bar, stop=stop,
                        stop_on_error=not args.keep_going)
    try:
        guard = ReadGuard()
        with sigint_stops(stop, lambda: eprint("\ntubemq produce: interrupted; waiting for in-flight messages "
                                                 "(Ctrl-C again to abandon them)"), guard):
            records = _records(args, stream, delimiter, attrs, counters)
            try:
                while not stop and (args.limit is None or pipe.submitted < args.limit):
                    guard.reading = True
                    try:
                        data, msg_attrs, stream_id = next(records)
                    except (StopIteration, ReadInterrupted):
                        break
                    finally:
                        guard.reading = False
                    if not pipe.submit(data, msg_attrs, stream_id):
                        break
            finally:
                bar.set_extra(f"in-flight {pipe.pending}")
                try:
                    pipe.drain(args.drain_timeout)
                    # still unanswered after --drain-timeout: unknown, whatever close() says, and not
                    # worth waiting for again; still under the Ctrl-C handler (a frozen server answers nothing)
                    producer.close(timeout=0 if pipe.abandon() else None)
                except KeyboardInterrupt:
                    abandoned = True
                bar.close()
    except KeyboardInterrupt:  # the second Ctrl-C landed outside the drain
        abandoned = True
    finally:
        if abandoned or not producer.closed:
            pipe.abandon()
            _abandon_close(producer)
    interrupted = abandoned or stop.reason == "interrupted"
    return _report(args, pipe, time.monotonic() - t0, counters, interrupted)


def _abandon_close(producer: Any) -> None:
    """Close the producer without waiting for the server (after a second Ctrl-C, or an error).

    A frozen server (``kill -STOP``) keeps its sockets open and answers nothing, so a normal close
    would wait for the flush and the deregistration; abandoned messages are reported as unknown
    instead, and the process exits without waiting for anyone.
    """
    closer = threading.Thread(target=producer.close, kwargs={"timeout": 0}, name="tubemq-abandon-close",
                              daemon=True)
    closer.start()
    closer.join(_ABANDON_CLOSE_WAIT)


def _user_attrs(attrs: dict[str, str]) -> dict[str, str]:
    """Attributes from an envelope minus the system keys the producer sets itself ($msgType$/$msgTime$)."""
    return {k: v for k, v in attrs.items() if not (k.startswith("$") and k.endswith("$"))}


def _report(
    args: argparse.Namespace, pipe: SendPipeline, elapsed: float, counters: _Counters, interrupted: bool,
) -> int:
    skipped, bad = counters.skipped, counters.invalid
    s = pipe.summary()
    unknown = s["unknown"]  # in flight when the wait ended, timed out, or lost with its connection
    s.update({"skipped_empty": skipped, "invalid_lines": bad, "interrupted": interrupted,
              "wall_seconds": elapsed})
    if args.json_summary:
        print(json.dumps(s, sort_keys=True))
    rate = s["acknowledged"] / elapsed if elapsed > 0 else 0.0
    rows = [
        ["submitted", s["submitted"]],
        ["acknowledged", s["acknowledged"]],
        ["failed", s["failed"]],
        ["not acknowledged (unknown)", unknown],
        ["skipped empty lines", skipped],
    ]
    if bad:
        rows.append(["invalid lines", bad])
    rows += [
        ["bytes acknowledged", format_bytes(s["bytes"])],
        ["elapsed", f"{elapsed:.2f} s"],
        ["rate", f"{format_count(rate)} msg/s"],
    ]
    eprint(format_table(["produce " + args.topic, "value"], rows))
    if pipe.first_error is not None:
        eprint(f"tubemq produce: first error: {type(pipe.first_error).__name__}: {pipe.first_error}")
    if interrupted:
        eprint(f"tubemq produce: interrupted: {s['acknowledged']} acknowledged, {s['failed']} failed, "
               f"{unknown} unknown (timed out or abandoned in flight: they may or may not be stored)")
        return EXIT_INTERRUPTED
    if s["failed"] or unknown or bad:
        return EXIT_FAILURE
    return 0
