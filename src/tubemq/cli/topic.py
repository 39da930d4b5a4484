"""``tubemq topic create|list|describe|set|delete`` through :class:`tubemq.admin.AdminClient`.

``--admin-url`` (a real master's web port, e.g. http://master:8080/webapi.htm), or ``--master HOST:PORT``
with ``--admin-port`` (the same host), or $TUBEMQ_ADMIN_URL; with none of them, the ``tubemq serve``
default (admin on 127.0.0.1:8080). The endpoint used is said on stderr.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import Any

from tubemq.errors import ConfigError

from .admin import DEFAULT_USER, AdminClient
from .common import EXIT_USAGE, CliError, note, resolve_admin_url
from .output import format_table, print_json

HELP = "create, list, describe, change or delete topics (HTTP admin API)"
ENV_TOKEN = "TUBEMQ_ADMIN_TOKEN"
ENV_USER = "TUBEMQ_ADMIN_USER"


def _conn_parent() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("connection")
    g.add_argument("--master", default=None, help="master HOST:PORT; needs --admin-port (same host) or --admin-url")
    g.add_argument("--admin-port", type=int, default=None, help="admin HTTP port on the host of --master")
    g.add_argument("--admin-url", default=None, help="full admin URL, e.g. http://master:8080/webapi.htm")
    g.add_argument(
        "--token", default=None, help=f"confModAuthToken for create/delete (default ${ENV_TOKEN})"
    )
    g.add_argument(
        "--user", default=None,
        help=f"user recorded as createUser/modifyUser: a letter, then letters, digits or _ (default ${ENV_USER} "
        f"or {DEFAULT_USER})",
    )
    g.add_argument("--timeout", type=float, default=10.0, help="HTTP timeout in seconds (default 10)")
    return p


def admin_actions(sub: Any, command: str, help_text: str) -> Callable[..., argparse.ArgumentParser]:
    """Register ``tubemq COMMAND ACTION``; return ``action(name, func, help, description=None, **defaults)``.

    ``topic``, ``broker`` and ``group`` share this shape: every ACTION takes the connection options and
    runs ``func``; the description defaults to ``help`` as a sentence.
    """
    p = sub.add_parser(command, help=help_text, description=help_text + ".")
    actions = p.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    parent = _conn_parent()

    def action(
        name: str, func: Callable[[argparse.Namespace], int], help: str, description: str | None = None, **defaults: Any
    ) -> argparse.ArgumentParser:
        a: argparse.ArgumentParser = actions.add_parser(
            name, parents=[parent], help=help, description=description or f"{help[0].upper()}{help[1:]}."
        )
        a.set_defaults(func=func, **defaults)
        return a

    return action


def output_option(p: argparse.ArgumentParser, *extra: str) -> None:
    """``--output/-o``: ``table`` (the default), ``json`` or one of ``extra``."""
    p.add_argument("--output", "-o", choices=("table", "json", *extra), default="table")


def register(sub: Any) -> None:
    action = admin_actions(sub, "topic", HELP)

    c = action("create", run_create, "create a topic")
    c.add_argument("name", help="topic name: a letter, then letters, digits or _ (at most 64)")
    c.add_argument("--partitions", "-p", type=int, default=3, help="partitions per store (default 3)")
    c.add_argument("--stores", type=int, default=1, help="partition stores on the broker (default 1)")
    c.add_argument("--max-msg-size-mb", type=int, default=None, help="max message size in MiB (default: cluster's)")
    c.add_argument("--broker-id", default="1", help="broker id(s), comma separated, that host it (default 1)")
    c.add_argument("--no-publish", action="store_true", help="create it refusing publication (acceptPublish=false)")
    c.add_argument("--no-subscribe", action="store_true", help="create it refusing subscription (acceptSubscribe=false)")
    c.add_argument("--if-not-exists", action="store_true", help="succeed when the topic already exists")

    output_option(action("list", run_list, "list topics"), "names")

    d = action("describe", run_describe, "show one topic")
    d.add_argument("name")
    output_option(d)

    st = action(
        "set", run_set, "change a topic's settings",
        "Change a topic's settings (admin_update_topic_control_info, admin_modify_topic_info).",
    )
    st.add_argument("name", help="topic name (comma separated for several)")
    st.add_argument("--max-msg-size-mb", type=int, default=None, help="max message size in MiB (1..20)")
    st.add_argument("--partitions", type=int, default=None,
                    help="partitions per store (admin_modify_topic_info; real masters only grow it)")
    st.add_argument("--accept-publish", choices=("true", "false"), default=None, help="accept publication")
    st.add_argument("--accept-subscribe", choices=("true", "false"), default=None, help="accept subscription")

    rm = action("delete", run_delete, "delete a topic")
    rm.add_argument("name")
    rm.add_argument("--broker-id", default=None,
                    help="broker id(s), comma separated (default: every broker the topic is on)")
    rm.add_argument("--stop-first", action="store_true",
                    help="turn publish and subscribe off first (a real master refuses to delete a topic that "
                         "still accepts either: record error 406)")
    rm.add_argument(
        "--purge", action="store_true",
        help="real master: also remove the soft-deleted record (admin_remove_topic_info)",
    )
    rm.add_argument("--if-exists", action="store_true", help="succeed when the topic does not exist")


def client_from_args(args: argparse.Namespace) -> AdminClient:
    token = args.token or os.environ.get(ENV_TOKEN) or None
    if args.admin_url and (args.master or args.admin_port is not None):
        raise CliError("give either --admin-url or --master/--admin-port, not both", EXIT_USAGE)
    url = resolve_admin_url(args.admin_url, args.master, args.admin_port)
    if args.timeout <= 0:
        raise CliError("--timeout must be positive", EXIT_USAGE)
    user = getattr(args, "user", None) or os.environ.get(ENV_USER) or DEFAULT_USER
    try:
        return AdminClient(url, token, user=user, timeout=args.timeout)
    except ConfigError as exc:
        raise CliError(f"--user: {exc}", EXIT_USAGE) from None


# ---- normalising topic records (embedded server and real master answer slightly different shapes)


def _first(d: dict[str, Any], *keys: str, default: Any = None) -> Any:
    for k in keys:
        if k in d and d[k] is not None:
            return d[k]
    return default


def topic_row(rec: dict[str, Any]) -> dict[str, Any]:
    """A flat view of one topic record: name, partitions, stores, brokers, max size, flags."""
    infos = rec.get("topicInfo")
    per_broker = [i for i in infos if isinstance(i, dict)] if isinstance(infos, list) else []
    if per_broker:
        parts = sum(int(_first(i, "numPartitions", default=0)) * int(_first(i, "numTopicStores", default=1))
                    for i in per_broker)
        stores = max(int(_first(i, "numTopicStores", default=1)) for i in per_broker)
        brokers = ",".join(str(_first(i, "brokerId", default="?")) for i in per_broker)
        first = per_broker[0]
    else:
        first = rec
        n = int(_first(rec, "numPartitions", "partitions", default=0))
        stores = int(_first(rec, "numTopicStores", "numStores", "stores", default=1))
        parts = int(_first(rec, "totalCfgNumPart", "totalPartitions", default=n * stores))
        brokers = str(_first(rec, "brokerId", "brokerIds", default=""))
    max_mb = _first(rec, "maxMsgSizeInMB", default=_first(first, "maxMsgSizeInMB", "maxMsgSizeMB"))
    max_bytes = _first(first, "maxMsgSize", "maxMsgSizeInB")
    if max_mb is None and max_bytes is not None:
        max_mb = round(int(max_bytes) / 1048576, 2)
    return {
        "topic": _first(rec, "topicName", "topic", "name", default="?"),
        "partitions": parts,
        "stores": stores,
        "brokers": brokers,
        "max_msg_size_mb": max_mb,
        "accept_publish": _first(rec, "isSrvAcceptPublish", "acceptPublish", default=_first(first, "acceptPublish")),
        "accept_subscribe": _first(
            rec, "isSrvAcceptSubscribe", "acceptSubscribe", default=_first(first, "acceptSubscribe")
        ),
    }


# ---- actions


def run_create(args: argparse.Namespace) -> int:
    from .admin import AdminError

    if args.partitions < 1 or args.stores < 1:
        raise CliError("--partitions and --stores must be at least 1", EXIT_USAGE)
    client = client_from_args(args)
    try:
        client.create_topic(
            args.name, partitions=args.partitions, stores=args.stores, broker_ids=args.broker_id,
            max_msg_size_mb=args.max_msg_size_mb, accept_publish=not args.no_publish,
            accept_subscribe=not args.no_subscribe,
        )
    except AdminError as exc:
        if args.if_not_exists and _exists(client, args.name):
            note(f"topic {args.name} already exists")
            return 0
        raise CliError(f"cannot create topic {args.name}: {exc.message}") from None
    note(f"created topic {args.name} ({args.partitions} partitions x {args.stores} stores)")
    return 0


def _exists(client: AdminClient, name: str) -> bool:
    return any(t.name == name for t in client.list_topics(name))


def run_list(args: argparse.Namespace) -> int:
    client = client_from_args(args)
    rows = sorted((topic_row(t.raw) for t in client.list_topics()), key=lambda r: str(r["topic"]))
    if args.output == "json":
        print(print_json(rows))
    elif args.output == "names":
        for r in rows:
            print(r["topic"])
    else:
        headers = ["TOPIC", "PARTITIONS", "STORES", "BROKERS", "MAX_MSG_MB", "PUBLISH", "SUBSCRIBE"]
        print(format_table(headers, [[r["topic"], r["partitions"], r["stores"], r["brokers"],
                                      r["max_msg_size_mb"] if r["max_msg_size_mb"] is not None else "default",
                                      r["accept_publish"], r["accept_subscribe"]] for r in rows]))
    return 0


def run_describe(args: argparse.Namespace) -> int:
    client = client_from_args(args)
    records = [t.raw for t in client.list_topics(args.name) if t.name == args.name]
    if not records:
        raise CliError(f"topic {args.name} not found")
    if args.output == "json":
        print(print_json(records[0]))
        return 0
    rec = records[0]
    row = topic_row(rec)
    width = max(len(k) for k in row)
    for key, value in row.items():
        print(f"{key.ljust(width)}  {'default' if value is None else value}")
    per_broker = [i for i in rec.get("topicInfo") or [] if isinstance(i, dict)]
    if per_broker:
        print()
        cols = ["brokerId", "brokerIp", "brokerPort", "numPartitions", "numTopicStores", "acceptPublish",
                "acceptSubscribe", "topicStatusId"]
        cols = [c for c in cols if any(c in i for i in per_broker)]
        print(format_table(cols, [[i.get(c) for c in cols] for i in per_broker]))
    return 0


def run_set(args: argparse.Namespace) -> int:
    from .admin import AdminError

    if args.max_msg_size_mb is not None and not 1 <= args.max_msg_size_mb <= 20:
        raise CliError("--max-msg-size-mb must be within 1..20", EXIT_USAGE)
    flags = {"accept_publish": args.accept_publish, "accept_subscribe": args.accept_subscribe}
    changes = {k: v == "true" for k, v in flags.items() if v is not None}
    if args.partitions is not None:
        if args.partitions < 1:
            raise CliError("--partitions must be at least 1", EXIT_USAGE)
        changes["partitions"] = args.partitions
    if args.max_msg_size_mb is None and not changes:
        raise CliError("nothing to change: give --max-msg-size-mb, --partitions, --accept-publish or "
                       "--accept-subscribe", EXIT_USAGE)
    client = client_from_args(args)
    try:
        client.update_topic(args.name, max_msg_size_mb=args.max_msg_size_mb, **changes)
    except AdminError as exc:
        raise CliError(f"cannot change topic {args.name}: {exc.message}") from None
    what = [f"max message size {args.max_msg_size_mb} MiB"] if args.max_msg_size_mb is not None else []
    what += [f"{k.replace('_', ' ')} {v}" for k, v in changes.items()]
    note(f"topic {args.name}: {', '.join(what)}")
    return 0


def run_delete(args: argparse.Namespace) -> int:
    from .admin import AdminError

    client = client_from_args(args)
    try:
        client.delete_topic(args.name, broker_ids=args.broker_id, purge=args.purge, stop_first=args.stop_first)
    except AdminError as exc:
        if args.if_exists and not _exists(client, args.name):
            note(f"topic {args.name} does not exist")
            return 0
        hint = " (--stop-first turns them off)" if exc.code == 406 and not args.stop_first else ""
        raise CliError(f"cannot delete topic {args.name}: {exc.message}{hint}") from None
    note(f"deleted topic {args.name}")
    return 0
