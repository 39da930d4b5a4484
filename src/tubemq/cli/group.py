"""``tubemq group list|describe|offsets|reset|clone``: consumer groups and their offsets.

Built on :class:`tubemq.admin.AdminClient`: members come from the master
(``admin_query_consume_group_detail``), offsets from the brokers' web APIs (``admin_query_offset``,
``admin_set_offset``, ``admin_clone_offset``). ``reset --to-datetime`` moves each partition to its first
message appended at or after the time (Kafka's ``--reset-offsets --to-datetime``); it needs the
embedded server's time lookup. ``reset --to-history`` puts the group back to the offsets it had itself
at a time (the brokers' offset history, read with ``admin_get_group_history_offset`` and set with
``admin_set_offset``: both work on TubeMQ 2.5, whose own ``admin_set_offset_by_time`` does not). A running consumer of the group picks the new offsets up at its next
fetch of each partition; a consumer that holds fetched but unconfirmed messages may confirm past them.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
from typing import Any

from ..admin import PartitionOffset
from ..sync.bound import BoundConsumer
from .admin import AdminError
from .common import EXIT_USAGE, CliError, note
from .output import format_table, print_json
from .topic import admin_actions, client_from_args, output_option

HELP = "list groups, show their members and offsets, reset or clone offsets (HTTP admin API)"
#: LAG_MSGS: messages, where known (the partition alone in its store), else "-"; LAG_INDEX_BYTES: TubeMQ's
#: index units (28 per entry, the store's siblings' entries included)
_OFFSET_HEADERS = ["TOPIC", "BROKER", "PARTITION", "OFFSET", "MAX_OFFSET", "LAG_MSGS", "LAG_INDEX_BYTES"]


def register(sub: Any) -> None:
    action = admin_actions(sub, "group", HELP)
    action("list", run_list, "groups with offsets on the brokers",
           "Groups with offsets on any broker (admin_get_booked_groupname).")

    d = action("describe", run_describe, "a group's members and their partitions",
               "A group's members and partitions (admin_query_consume_group_detail).")
    d.add_argument("group")
    output_option(d)

    o = action("offsets", run_offsets, "a group's offsets and lag per partition",
               "A group's committed offset, max offset and lag per partition (admin_query_offset).")
    o.add_argument("group")
    o.add_argument("--topic", "-t", default=None, help="only these topics (comma separated)")
    output_option(o)

    r = action("reset", run_reset, "move a group's offsets on a topic",
               "Move a group's offsets on every partition of a topic (admin_set_offset).")
    r.add_argument("group")
    r.add_argument("--topic", "-t", required=True, help="the topic whose offsets move")
    to = r.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true", help="to the oldest message kept")
    to.add_argument("--to-latest", action="store_true", help="past the newest message")
    to.add_argument("--to-offset", type=int, default=None, metavar="N", help="to index offset N (clamped into range)")
    to.add_argument("--to-datetime", default=None, metavar="TIME",
                    help="to the first message appended at or after TIME: ISO 8601 (2026-01-31T12:00:00, local "
                         "time unless it has an offset such as +00:00) or epoch milliseconds")
    to.add_argument("--to-history", default=None, metavar="TIME",
                    help="to the offsets the group itself had committed at TIME (the brokers' offset history: "
                         "admin_get_group_history_offset, then admin_set_offset; real TubeMQ 2.5 brokers and "
                         "the embedded server)")
    r.add_argument("--by-msg-time", action="store_true",
                   help="with --to-datetime: find the offsets from the messages' msgTime (a search with bound reads "
                        "through --master; works on real brokers, which have no time lookup; one minute precision)")
    r.add_argument("--dry-run", action="store_true", help="show the offsets it would set, change nothing")
    output_option(r)

    c = action("clone", run_clone, "copy a group's offsets to other groups",
               "Copy a group's offsets to other groups (admin_clone_offset).")
    c.add_argument("source")
    c.add_argument("targets", help="target group(s), comma separated")
    c.add_argument("--topic", "-t", default=None, help="only these topics (comma separated)")


def parse_time(text: str) -> dt.datetime | int:
    """``--to-datetime``: epoch milliseconds or ISO 8601 (naive = local time)."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise CliError(f"--to-datetime {text!r}: expected ISO 8601 (2026-01-31T12:00:00) or epoch ms",
                       EXIT_USAGE) from None


def _stamp(ms: object) -> str:
    """A history record's time (epoch ms) as local ISO time."""
    return dt.datetime.fromtimestamp(ms / 1000).isoformat(timespec="seconds") if isinstance(ms, int) else "-"


def _offset_rows(rows: list[PartitionOffset]) -> list[list[Any]]:
    return [[r.topic, r.broker_id, r.partition_id, r.offset, r.max_offset,
             "-" if r.lag_messages is None else r.lag_messages, r.lag] for r in rows]


def _show_offsets(rows: list[PartitionOffset], output: str) -> None:
    if output == "json":
        print(print_json([{"group": r.group, "topic": r.topic, "broker_id": r.broker_id,
                           "partition_id": r.partition_id, "offset": r.offset, "max_offset": r.max_offset,
                           "lag": r.lag, "lag_index_bytes": r.lag, "lag_messages": r.lag_messages} for r in rows]))
    else:
        print(format_table(_OFFSET_HEADERS, _offset_rows(rows)))


def _offsets_by_msg_time(args: argparse.Namespace, when: dt.datetime | int) -> dict[str, int]:
    """{partition key: first offset of ``when``'s minute} of every partition of the topic, searched on
    the messages' msgTime through a bound consumer of a private group (its offsets stay on the brokers)."""
    if not args.master:
        raise CliError("--by-msg-time needs --master HOST:PORT: the search reads the partitions", EXIT_USAGE)
    ms = when if isinstance(when, int) else int(when.timestamp() * 1000)
    with BoundConsumer(args.master, group=f"tubemq_timesearch_{os.getpid()}", topics=[args.topic]) as bc:
        return {p.key: bc.offset_for_time(p, ms) for p in bc.partitions(args.topic)}


def _skipped(result: object) -> bool:
    """Say on stderr which brokers' web APIs did not answer (skipped); True when any did not."""
    unreachable = getattr(result, "unreachable", None) or {}
    for bid, why in sorted(unreachable.items()):
        note(f"broker {bid} skipped: its web API did not answer ({why})")
    return bool(unreachable)


def run_list(args: argparse.Namespace) -> int:
    groups = client_from_args(args).list_groups()
    for group in groups:
        print(group)
    _skipped(groups)
    return 0


def run_describe(args: argparse.Namespace) -> int:
    detail = client_from_args(args).group_detail(args.group)
    if args.output == "json":
        print(print_json(detail.raw))
        return 0
    print(f"group {args.group}: {len(detail.members)} member(s), topics {', '.join(detail.topics) or '-'}")
    rows = [[m.consumer_id, m.address, p.topic, p.broker_id, p.partition_id]
            for m in detail.members for p in (m.partitions or ())]
    if rows:
        print(format_table(["CONSUMER", "FROM", "TOPIC", "BROKER", "PARTITION"], rows))
    return 0


def run_offsets(args: argparse.Namespace) -> int:
    rows = client_from_args(args).group_offsets(args.group, args.topic)
    _skipped(rows)
    if not rows and args.output == "table":
        note(f"group {args.group} has no offsets{' on ' + args.topic if args.topic else ''}")
        return 0
    _show_offsets(rows, args.output)
    return 0


def run_reset(args: argparse.Namespace) -> int:
    client = client_from_args(args)
    try:
        if args.to_history is not None:
            if args.dry_run:
                raise CliError("--dry-run is not available with --to-history (the brokers apply it at once)", EXIT_USAGE)
            history = client.set_offsets_by_time(args.group, parse_time(args.to_history), args.topic)
            print(format_table(["TOPIC", "BROKER", "PARTITION", "OFFSET", "RECORDED_AT"],
                               [[r["topicName"], r["brokerId"], r["partitionId"], r["offset"],
                                 _stamp(r.get("recordTime"))] for r in history]))
            if _skipped(history):
                note(f"group {args.group}: offsets on {args.topic} set from its history on the brokers that "
                     "answered only")
                return 1
            note(f"group {args.group}: offsets on {args.topic} set from its history")
            return 0
        if args.to_datetime is not None and args.by_msg_time:
            by_key = _offsets_by_msg_time(args, parse_time(args.to_datetime))
            if args.dry_run:
                print(format_table(["PARTITION", "NEW_OFFSET"], sorted(by_key.items())))
                return 0
            done = client.set_offsets(args.group, by_key)
            rows = client.group_offsets(args.group, args.topic)
            rows.unreachable.update(done.unreachable)
        elif args.to_datetime is not None:
            when = parse_time(args.to_datetime)
            if args.dry_run:
                found = client.offsets_for_times(args.topic, when)
                print(format_table(["TOPIC", "BROKER", "PARTITION", "NEW_OFFSET"],
                                   [[t.topic, t.broker_id, t.partition_id, t.offset] for t in found]))
                return 0
            rows = client.reset_offsets_to_time(args.group, args.topic, when)
        else:
            to: str | int = "earliest" if args.to_earliest else "latest" if args.to_latest else args.to_offset
            if isinstance(to, int) and to < 0:
                raise CliError("--to-offset must be at least 0", EXIT_USAGE)
            if args.dry_run:
                note(f"would move group {args.group} on {args.topic} to {to}; current offsets:")
                _show_offsets(client.group_offsets(args.group, args.topic), args.output)
                return 0
            rows = client.reset_offsets(args.group, args.topic, to)
    except AdminError as exc:
        raise CliError(f"cannot reset group {args.group} on {args.topic}: {exc.message}") from None
    if _skipped(rows):
        note(f"group {args.group}: offsets on {args.topic} reset on the brokers that answered only")
        _show_offsets(rows, args.output)
        return 1
    note(f"group {args.group}: offsets on {args.topic} reset")
    _show_offsets(rows, args.output)
    return 0


def run_clone(args: argparse.Namespace) -> int:
    client = client_from_args(args)
    try:
        n = client.clone_offsets(args.source, args.targets, args.topic)
    except AdminError as exc:
        raise CliError(f"cannot clone offsets of {args.source}: {exc.message}") from None
    note(f"cloned offsets of {args.source} to {args.targets} on {n} broker(s)")
    return 0
