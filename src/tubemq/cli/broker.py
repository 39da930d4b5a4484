"""``tubemq broker list|add|online|reload|offline|delete`` through the master's HTTP admin API.

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
from .topic import admin_actions, client_from_args, output_option

HELP = "list, add, online, reload, offline or delete brokers (HTTP admin API)"

_STATUS_COLUMNS = ("brokerId", "brokerIp", "brokerPort", "manageStatus", "runStatus", "isBrokerOnline",
                   "acceptPublish", "acceptSubscribe", "enableTLS")


def register(sub: Any) -> None:
    action = admin_actions(sub, "broker", HELP)
    output_option(action("list", run_list, "brokers and their run status",
                         "Brokers and their run status (admin_query_broker_run_status)."))

    add = action("add", run_add, "add a broker configure record",
                 "Add a broker configure record (admin_add_broker_configure), as draft.")
    add.add_argument("ip", help="the broker's IPv4 address")
    add.add_argument("--broker-id", type=int, default=None, help="broker id (default: derived from the address)")
    add.add_argument("--port", type=int, default=None, help="broker RPC port (default 8123)")
    add.add_argument("--tls-port", type=int, default=None, help="broker TLS port (default 8124)")
    add.add_argument("--web-port", type=int, default=None, help="broker web port (default 8081)")

    for name, what in (("online", "put brokers online (admin_online_broker_configure)"),
                       ("reload", "make brokers reload their configure (admin_reload_broker_configure)"),
                       ("offline", "take brokers out of service (admin_offline_broker_configure)"),
                       ("delete", "delete offline brokers' configure (admin_delete_broker_configure)")):
        a = action(name, run_change, what.split(" (")[0], what[0].upper() + what[1:] + ".", change=name)
        a.add_argument("broker_ids", metavar="BROKER_ID", help="broker id(s), comma separated")


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
    call = {"online": client.online_brokers, "reload": client.reload_brokers, "offline": client.offline_brokers,
            "delete": client.delete_brokers}[args.change]
    try:
        call(args.broker_ids)
    except AdminError as exc:
        raise CliError(f"cannot {args.change} broker(s) {args.broker_ids}: {exc.message}") from None
    note(f"{args.change}: broker(s) {args.broker_ids}")
    return 0
