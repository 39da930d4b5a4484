"""``tubemq consume``: read a topic through a consumer group to stdout or a file.

--count N stops after N messages (with --format inlongmsg: N records, the lines written). Each fetched
batch is committed for the group once all of its messages were written, so a killed consumer re-reads at
most the batch it was writing (at-least-once). When --count ends the run in the middle of a batch, that
batch is NOT committed: the group gets those messages again (the summary says how many were committed).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import IO, Any

from . import inlong
from .common import (
    CONSUMER_CLI_DEFAULTS,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    CliError,
    check_reachable,
    eprint,
    open_client,
    plain,
    resolve_target,
)
from .output import format_table, message_to_json
from .pipeline import StopFlag, sigint_stops
from .produce import _delimiter
from .progress import ProgressBar, format_bytes, format_count

HELP = "read messages of a topic through a consumer group"

#: How long --timeout waits at least for the first partition assignment (a real master's balance period).
ASSIGN_GRACE_S = 75.0


def register(sub: Any) -> None:
    p = sub.add_parser("consume", help=HELP, description=HELP + ". " + plain((__doc__ or "").split("\n\n", 1)[1]))
    p.add_argument("--topic", "-t", required=True)
    p.add_argument("--group", "-g", required=True, help="consumer group name")
    p.add_argument("--master", "-m", default=None, help="master HOST:PORT[,HOST:PORT] (default: local server)")
    p.add_argument(
        "--from", dest="consume_from", choices=("earliest", "latest", "max"), default="earliest",
        help="where a group with no committed offset starts (default earliest); 'max' always starts at the end",
    )
    p.add_argument("--count", "-n", type=int, default=None,
                   help="stop after this many messages (--format inlongmsg: records); a batch cut short "
                   "is not committed, so the group reads its messages again")
    p.add_argument(
        "--timeout", type=float, default=None,
        help="stop after this many seconds without a message once partitions are assigned (the first "
        "assignment may take up to a minute on a real master; default: run until Ctrl-C or --count)",
    )
    p.add_argument("--format", "-f", choices=("raw", "json", "inlongmsg"), default="raw",
                   help="raw: the message bytes + delimiter; json: one JSON object per message with metadata; "
                   "inlongmsg: decode InLong containers, one JSON object per record")
    p.add_argument("--delimiter", default="\\n", help="written after each raw message (default \\n)")
    p.add_argument("--output", "-o", default=None, help="write to this file instead of stdout")
    p.add_argument("--stream-id", action="append", default=None,
                   help="only messages with this stream id (repeat; a server-side filter)")
    p.add_argument("-X", "--option", action="append", metavar="KEY=VALUE",
                   help="client option, e.g. -X rpc_timeout_ms=5000 (any ConsumerConfig field)")
    p.add_argument("--progress", dest="progress", action="store_true", default=None, help="force the progress bar")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="never draw the progress bar")
    p.set_defaults(func=run)


class IdleClock:
    """``--timeout``: seconds without a message, counted once the consumer has partitions.

    A real master balances only every 60 s, so before the first assignment the clock allows at least
    ``ASSIGN_GRACE_S``; ``timeout=None`` never expires.
    """

    def __init__(self, consumer: Any, timeout: float | None, grace: float = ASSIGN_GRACE_S) -> None:
        self.consumer = consumer
        self.timeout = timeout
        self.assigned = False
        self.since = time.monotonic()
        self.assign_deadline = self.since + max(timeout or 0.0, grace)

    def touch(self) -> None:
        self.assigned = True
        self.since = time.monotonic()

    def left(self) -> float:
        """Seconds until expiry (inf without a timeout)."""
        if not self.assigned and self.consumer.assignment():
            self.touch()
        if self.timeout is None:
            return float("inf")
        deadline = self.since + self.timeout if self.assigned else self.assign_deadline
        return deadline - time.monotonic()


def _write_inlong(out: IO[bytes], msg: Any, limit: int | None) -> tuple[int, bool]:
    """One JSON line per record, at most ``limit``: (records written, whether all of them were).

    A message that is no InLong container is reported and skipped (0 records, complete).
    """
    from ..errors import InLongMsgError

    try:
        lines = inlong.records_to_json(msg)
    except InLongMsgError as exc:
        eprint(f"tubemq consume: skipping message {msg.message_id} of {msg.topic}: not an InLong container ({exc})")
        return 0, True
    if limit is not None:
        complete = len(lines) <= limit
        lines = lines[:limit]
    else:
        complete = True
    n = 0
    for line in lines:
        out.write(line.encode("utf-8") + b"\n")
        n += 1
    return n, complete


def run(args: argparse.Namespace) -> int:
    if args.count is not None and args.count < 1:
        raise CliError("--count must be at least 1", EXIT_USAGE)
    if args.timeout is not None and args.timeout <= 0:
        raise CliError("--timeout must be positive", EXIT_USAGE)
    delimiter = _delimiter(args.delimiter)
    master, target = resolve_target(args.master, args.option, CONSUMER_CLI_DEFAULTS)
    check_reachable(master)

    from tubemq import Consumer

    out: IO[bytes]
    if args.output and args.output != "-":
        try:
            out = open(args.output, "wb")  # noqa: SIM115 - closed below
        except OSError as exc:
            raise CliError(f"cannot write {args.output}: {exc.strerror or exc}") from None
    else:
        out = sys.stdout.buffer
    show_bar = args.progress
    if show_bar is None and out is sys.stdout.buffer and sys.stdout.isatty():
        show_bar = False  # do not draw over messages on the same terminal
    bar = ProgressBar(args.count, f"consume {args.topic}", enabled=show_bar)
    topics: Any = {args.topic: set(args.stream_id)} if args.stream_id else [args.topic]
    stop = StopFlag()
    n = 0  # what --count counts: messages, or records with --format inlongmsg
    messages = 0
    committed = 0
    uncommitted = 0
    nbytes = 0
    t0 = time.monotonic()
    as_json = args.format == "json"
    as_inlong = args.format == "inlongmsg"
    try:
        consumer = open_client(Consumer, target, group=args.group, topics=topics, consume_from=args.consume_from)
        with consumer:
            with sigint_stops(stop):
                idle = IdleClock(consumer, args.timeout)
                while not stop and (args.count is None or n < args.count):
                    left = idle.left()
                    if left <= 0:
                        break
                    batch = consumer.poll(timeout=min(0.5, left))
                    if batch is None or not len(batch):
                        if batch is not None:
                            consumer.confirm(batch, consumed=True)
                        continue
                    idle.touch()
                    written = 0  # messages of this batch written completely
                    units = 0
                    for msg in batch:
                        if args.count is not None and n >= args.count:
                            break
                        if as_json:
                            out.write(message_to_json(msg).encode("utf-8") + b"\n")
                            done, complete = 1, True
                        elif as_inlong:
                            room = None if args.count is None else args.count - n
                            done, complete = _write_inlong(out, msg, room)
                        else:
                            out.write(msg.data)
                            out.write(delimiter)
                            done, complete = 1, True
                        n += done
                        units += done
                        messages += 1
                        nbytes += len(msg.data)
                        if not complete:
                            break
                        written += 1
                    out.flush()
                    bar.update(units)
                    whole = written == len(batch)
                    consumer.confirm(batch, consumed=whole)
                    if whole:
                        committed += len(batch)
                    else:
                        uncommitted += len(batch)
    finally:
        bar.close()
        if out is not sys.stdout.buffer:
            out.close()
        else:
            try:
                out.flush()
            except BrokenPipeError:
                pass
    elapsed = time.monotonic() - t0
    rows: list[list[Any]] = [["group", args.group], ["messages", messages]]
    if as_inlong:
        rows.append(["records", n])
    rows += [
        ["bytes", format_bytes(nbytes)],
        ["committed", f"{committed} messages" + (
            f"; {uncommitted} of a batch cut by --count were not: the group gets them again" if uncommitted
            else "")],
        ["elapsed", f"{elapsed:.2f} s"],
        ["rate", f"{format_count(messages / elapsed if elapsed > 0 else 0)} msg/s"],
    ]
    eprint(format_table(["consume " + args.topic, "value"], rows))
    # Ctrl-C ends the consume after the last batch was settled (the summary says what was committed);
    # the status says it was stopped, as for every command, so a script can tell it from --count/--timeout
    return EXIT_INTERRUPTED if stop else 0
