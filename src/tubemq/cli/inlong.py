"""``--format inlongmsg`` of ``tubemq produce`` and ``tubemq consume``: InLong containers on the command line.

``produce`` packs input lines into InLongMsg containers (one attribute string for all of them,
``--attrs``; its ``streamId`` becomes the TubeMQ stream id, as DataProxy does), starting a new container whenever the builder reports it reached ``--capacity``: each
container is one TubeMQ message. ``consume`` decodes every message and writes one JSON line per
record (see :func:`records_to_json`).
"""

from __future__ import annotations

import argparse
import base64
import json
from collections.abc import Iterator
from typing import Any

from .._imports import install_hint
from .common import EXIT_USAGE, CliError

__all__ = ["add_produce_arguments", "check_produce_arguments", "pack_containers", "records_to_json"]


def add_produce_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("--format inlongmsg (pack lines into InLong containers)")
    g.add_argument("--attrs", default=None, metavar="K=V&K=V",
                   help="InLong attribute string of every record, e.g. 'groupId=g&streamId=s'")
    g.add_argument("--capacity", type=int, default=4096,
                   help="start a new container once one holds about this many bytes (default 4096)")
    g.add_argument("--inlong-version", type=int, choices=(1, 2), default=1, help="container version (default 1)")
    g.add_argument("--snappy", action="store_true",
                   help="snappy-compress each container's records (needs cramjam: the 'inlong' extra)")


def check_produce_arguments(args: argparse.Namespace) -> None:
    """Usage errors before anything connects."""
    if args.format != "inlongmsg":
        if args.attrs is not None or args.snappy:
            raise CliError("--attrs/--snappy go with --format inlongmsg", EXIT_USAGE)
        return
    if args.capacity < 1:
        raise CliError("--capacity must be at least 1", EXIT_USAGE)
    from ..inlongmsg import parse_attr

    if args.attrs and not parse_attr(args.attrs):
        raise CliError(f"--attrs {args.attrs!r} is not an InLong attribute string (k=v&k=v)", EXIT_USAGE)
    if args.snappy:
        try:
            import cramjam  # noqa: F401
        except ImportError:
            raise CliError(f"--snappy needs the cramjam package: {install_hint('inlong')}", EXIT_USAGE) from None


def pack_containers(
    args: argparse.Namespace, records: Iterator[tuple[bytes, dict[str, str], str | None]]
) -> Iterator[tuple[bytes, dict[str, str], str | None]]:
    """Input records (data, attributes, stream id) -> one (container, attributes, stream id) per container."""
    from ..inlongmsg import InLongMsgBuilder

    attr = args.attrs or ""
    # like DataProxy: the container's TubeMQ stream id is its InLong streamId (unless --stream-id is given)
    from ..inlongmsg import parse_attr

    inlong_stream = parse_attr(attr).get("streamId") or None

    def new() -> InLongMsgBuilder:
        return InLongMsgBuilder(args.inlong_version, compress=args.snappy, capacity=args.capacity)

    builder = new()
    meta: tuple[dict[str, str], str | None] | None = None
    for data, attributes, stream_id in records:
        meta = (attributes, stream_id or inlong_stream)
        if not builder.add(attr, data):
            yield builder.build(), meta[0], meta[1]
            builder = new()
    if builder.msg_count and meta is not None:
        yield builder.build(), meta[0], meta[1]


def records_to_json(msg: Any) -> list[str]:
    """One JSON line (no newline) per record of an InLong container message.

    Fields: ``topic``, ``partition``, ``offset`` (of the TubeMQ message), ``index`` (the record's
    position in its container), ``attr`` (the raw attribute string), ``attributes`` (parsed as InLong
    Sort does) and ``body`` (UTF-8 text) or ``body_b64``. Raises InLongMsgError for other messages.
    """
    from ..inlongmsg import decode, parse_attr

    container = decode(msg.data)
    part = getattr(msg, "partition", None)
    base: dict[str, Any] = {
        "topic": msg.topic,
        "partition": getattr(part, "partition_id", part),
        "offset": getattr(msg, "offset", None),
        "version": container.version,
        "create_time": container.create_time,
    }
    lines = []
    index = 0
    for attr in container.attrs:
        kv = parse_attr(attr)
        for body in container.bodies(attr):
            rec = dict(base, index=index, attr=attr, attributes=kv)
            try:
                rec["body"] = bytes(body).decode("utf-8")
            except UnicodeDecodeError:
                rec["body_b64"] = base64.b64encode(body).decode("ascii")
            lines.append(json.dumps(rec, ensure_ascii=False, separators=(",", ":")))
            index += 1
    return lines
