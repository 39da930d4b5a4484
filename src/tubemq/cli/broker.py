"""``tubemq broker list|add|online|reload`` through the master's HTTP admin API.

The calls a real TubeMQ deployment makes to bring a broker into service (add its configure record,
put it online, reload it after topic changes) and the run-status query, against a real master or the
embedded server. Connection options are the same as ``tubemq topic``.
"""

from __future__ import annotations

import argparse
from typing import Any

from .admin import AdminError
from .common import CliError, note
from .output import format_table, print_json
from .topic import _conn_parent, client_from_args

HELP = "list, add, online or reload brokers (HTTP admin API)"

_STATUS_COLUMNS = ("brokerId", "brokerIp", "brokerPort", "manageStatus", "runStatus", "isBrokerOnline",
                   "acceptPublish", "acceptSubscribe", "enableTLS")


def register(sub: Any) -> None:
    p = sub.add_parser("broker", help=HELP, description=HELP + ".")
    actions = p.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    parent = _conn_parent()

    ls = actions.add_parser("list", parents=[parent], help="brokers and their run status",
                            description="Brokers and their run status (admin_query_broker_run_status).")
    ls.add_argument("--output", "-o", choices=("table", "json"), default="table")
    ls.set_defaults(func=run_list)

    add = actions.add_parser("add", parents=[parent], help="add a broker configure record",
                             description="Add a broker configure record (admin_add_broker_configure), as draft.")
    add.add_argument("ip", help="the broker's IPv4 address")
    add.add_argument("--broker-id", type=int, default=None, help="broker id (default: derived from the address)")
    add.add_argument("--port", type=int, default=None, help="broker RPC port (default 8123)")
    add.add_argument("--tls-port", type=int, default=None, help="broker TLS port (default 8124)")
    add.add_argument("--web-port", type=int, default=None, help="broker web port (default 8081)")
    add.set_defaults(func=run_add)

    for name, what in (("online", "put brokers online (admin_online_broker_configure)"),
                       ("reload", "make brokers reload their configure (admin_reload_broker_configure)")):
        a = actions.add_parser(name, parents=[parent], help=what.split(" (")[0], description=what[0].upper() + what[1:] + ".")
        a.add_argument("broker_ids", metavar="BROKER_ID", help="broker id(s), comma separated")
        a.set_defaults(func=run_change, change=name)


def run_list(args: argparse.Namespace) -> int:
    rows = [b.raw for b in client_from_args(args).brokers()]
    if args.output == "json":
        print(print_json(rows))
    else:
        print(format_table(list(_STATUS_COLUMNS), [[r.get(c, "") for c in _STATUS_COLUMNS] for r in rows]))
    return 0


def run_add(args: argparse.Namespace) -> int:
    client = client_from_args(args)
    try:
        rows = client.add_broker(args.ip, broker_id=args.broker_id, port=args.port, tls_port=args.tls_port,
                                 web_port=args.web_port)
    except AdminError as exc:
        raise CliError(f"cannot add broker {args.ip}: {exc.message}") from None
    ids = ",".join(str(r.get("brokerId")) for r in rows)
    note(f"added broker {args.ip} (id {ids}, draft): `tubemq broker online {ids}` puts it in service")
    return 0


def run_change(args: argparse.Namespace) -> int:
    client = client_from_args(args)
    call = client.online_brokers if args.change == "online" else client.reload_brokers
    try:
        call(args.broker_ids)
    except AdminError as exc:
        raise CliError(f"cannot {args.change} broker(s) {args.broker_ids}: {exc.message}") from None
    note(f"{args.change}: broker(s) {args.broker_ids}")
    return 0
