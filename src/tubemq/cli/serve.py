"""``tubemq serve``: run the embedded master + broker (+ admin HTTP API) in the foreground."""

from __future__ import annotations

import argparse
import errno
import logging
import sys
from pathlib import Path
from typing import Any

from .common import EXIT_USAGE, CliError, port_in_use_status
from .detach import ENV_FILE

HELP = "run an embedded TubeMQ master+broker in the foreground (Ctrl-C to stop)"


def register(sub: Any) -> None:
    p = sub.add_parser(
        "serve",
        help=HELP,
        description=HELP + ". It speaks the real TubeMQ wire protocol, so any TubeMQ client "
        "(Java, Go, C++, this one) can use it; it binds 127.0.0.1 unless --host says otherwise.",
    )
    p.add_argument("--data-dir", required=True, type=Path, help="directory for topic metadata and message data")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--master-port", type=int, default=8715, help="master RPC port (default 8715; 0 = any free port)")
    p.add_argument("--broker-port", type=int, default=8123, help="broker RPC port (default 8123; 0 = any free port)")
    p.add_argument("--admin-port", type=int, default=8080, help="admin HTTP API port (default 8080; 0 = any free port)")
    p.add_argument("--broker-id", type=int, default=1,
                   help="the broker id advertised to clients (default 1; with --brokers N: the first of N ids)")
    p.add_argument("--brokers", type=int, default=1,
                   help="brokers in this process (default 1), on ports --broker-port, --broker-port+1, ... "
                   "(0 = free ones)")
    p.add_argument(
        "--role", choices=("all", "master", "broker"), default="all",
        help="all (default) = master + brokers + admin API; master = master + admin API (brokers run as separate "
        "processes); broker = one broker that registers with --master",
    )
    p.add_argument("--master", default=None, metavar="HOST:PORT[,HOST:PORT]",
                   help="--role broker: the master(s) to register with (their admin API is found through "
                   "the endpoints `tubemq serve` publishes, or give --master-admin-url)")
    p.add_argument("--master-admin-url", default=None, metavar="URL[,URL]",
                   help="--role broker: admin API URL(s) of the master(s), e.g. http://127.0.0.1:8080/webapi.htm")
    p.add_argument("--peer-master", default=None, metavar="HOST:PORT",
                   help="--role master: the other master of an active/standby pair (its master RPC port). A "
                   "standby replicates the peer's topics and brokers and takes over when HOST:PORT stays "
                   "unreachable; a master started while its peer is active joins as standby")
    p.add_argument("--peer-admin-url", default=None, metavar="URL",
                   help="the peer master's admin API (http://HOST:PORT/webapi.htm) to replicate from (default: "
                   "the address the peer's `tubemq serve` published on this machine)")
    p.add_argument("--takeover-after-ms", type=int, default=None,
                   help="with --peer-master: how long the peer must stay unreachable before this master "
                   "takes over (server default 2000)")

    p.add_argument("--broker-heartbeat-period-ms", type=int, default=None,
                   help="--role broker: registration heartbeat period; --role master with --peer-master: how "
                   "often a standby copies the active master (server default 500)")
    p.add_argument("--broker-heartbeat-timeout-ms", type=int, default=None,
                   help="master: a broker process silent this long goes offline (server default 2000)")
    p.add_argument(
        "--first-balance-delay-ms", type=int, default=None,
        help="when a new consumer group gets its partitions: 0 = at once (server default), -1 = at the next "
        "balance round like a real master",
    )
    p.add_argument("--admin-token", default=None, help="confModAuthToken required by admin modify calls (default: none)")
    p.add_argument(
        "--auth",
        action="store_true",
        help="require signed client authentication at the master (TubeMQ §8.2) and visit tokens at the broker",
    )
    p.add_argument(
        "--auth-user", action="append", metavar="USER:PASSWORD",
        help="a user whose signature the master verifies (repeat; implies --auth). Without users the master, "
        "like a real one with the default handler, checks only that user, signature and timestamp are present",
    )
    p.add_argument("--auth-users-file", type=Path, default=None,
                   help="file with one USER:PASSWORD per line (keeps passwords out of the process list)")
    p.add_argument("--tls-cert", default=None, help="PEM certificate: serve TLS on the RPC ports")
    p.add_argument("--tls-key", default=None, help="PEM private key for --tls-cert")
    p.add_argument("--tls-client-ca", default=None,
                   help="PEM CA bundle: require client certificates signed by it (mutual TLS; needs --tls-cert)")
    p.add_argument(
        "--flush",
        choices=("always", "interval", "never"),
        default="interval",
        help="fsync policy: before every acknowledgement, every --flush-interval-ms (default), or never",
    )
    p.add_argument("--flush-interval-ms", type=int, default=1000, help="fsync period for --flush interval (default 1000)")
    p.add_argument(
        "--cache-flush-interval-ms", type=int, default=20000,
        help="period of the broker's memory-cache flush into the files (default 20000, as a real broker)",
    )
    p.add_argument("--retention-ms", type=int, default=None, help="delete data older than this (default: keep)")
    p.add_argument("--retention-bytes", type=int, default=None, help="per-store size cap (default: none)")
    p.add_argument(
        "--balance-period-ms", type=int, default=None,
        help="consumer rebalance period (server default 1000; a real master uses 60000)",
    )
    p.add_argument("--standby", action="store_true",
                   help="start as a standby master (answers StandbyException; with --peer-master it replicates "
                   "the active master and takes over when it dies)")
    p.add_argument(
        "--detach", action="store_true",
        help="run in the background: return once the server accepts connections (exit 0, addresses and pid "
        "on stdout; log in DATA_DIR/tubemq-serve.log). Again for a running server of DATA_DIR: exit 0",
    )
    p.add_argument("--ready-timeout", type=float, default=60.0, metavar="SECONDS",
                   help="--detach: give up when the server is not serving after this long (default 60)")
    p.set_defaults(func=run)


def build_config(args: argparse.Namespace) -> Any:
    """ServerConfig from the parsed options (ConfigError -> usage error)."""
    from tubemq.errors import ConfigError
    from tubemq.server import ServerConfig

    if bool(args.tls_cert) != bool(args.tls_key):
        raise CliError("--tls-cert and --tls-key go together", EXIT_USAGE)
    options: dict[str, Any] = {
        "data_dir": args.data_dir,
        "host": args.host,
        "master_port": args.master_port,
        "broker_port": args.broker_port,
        "admin_port": args.admin_port,
        "broker_id": args.broker_id,
        "admin_token": args.admin_token,
        "tls_cert": args.tls_cert,
        "tls_key": args.tls_key,
        "tls_client_ca": args.tls_client_ca,
        "flush": args.flush,
        "flush_interval_ms": args.flush_interval_ms,
        "cache_flush_interval_ms": args.cache_flush_interval_ms,
        "retention_ms": args.retention_ms,
        "retention_bytes": args.retention_bytes,
        "standby": args.standby,
    }
    users = _auth_users(args)
    if args.auth or users:
        options["auth_enabled"] = True
        options["visit_token_check"] = True
    if users:
        options["auth_users"] = users
    if args.balance_period_ms is not None:
        options["balance_period_ms"] = args.balance_period_ms
    if args.first_balance_delay_ms is not None:
        options["first_balance_delay_ms"] = args.first_balance_delay_ms
    for name in ("broker_heartbeat_period_ms", "broker_heartbeat_timeout_ms", "takeover_after_ms"):
        if getattr(args, name) is not None:
            options[name] = getattr(args, name)
    options["brokers"] = args.brokers
    options["role"] = args.role
    if args.peer_master:
        options["peer_master"] = args.peer_master
    if args.peer_admin_url:
        if not args.peer_master:
            raise CliError("--peer-admin-url goes with --peer-master", EXIT_USAGE)
        options["master_admin_url"] = args.peer_admin_url
    if args.role == "broker":
        options["master_admin_url"] = _master_admin_urls(args)
    elif args.master or args.master_admin_url:
        raise CliError("--master / --master-admin-url go with --role broker", EXIT_USAGE)
    try:
        return ServerConfig(**options)
    except ConfigError as exc:
        raise CliError(f"bad server option {exc}", EXIT_USAGE) from None


def _master_admin_urls(args: argparse.Namespace) -> str:
    """Admin URLs of the masters a broker process registers with: given, or published by them."""
    if args.master_admin_url:
        return str(args.master_admin_url)
    if not args.master:
        raise CliError("--role broker needs --master HOST:PORT (or --master-admin-url)", EXIT_USAGE)
    from .common import lookup_published

    urls = []
    for address in (a.strip() for a in args.master.split(",")):
        if not address:
            continue
        ep = lookup_published(address)
        if ep is None:
            raise CliError(
                f"no running embedded master published its admin API for {address}: give --master-admin-url",
                EXIT_USAGE,
            )
        urls.append(ep.admin_url)
    return ",".join(urls)


def _auth_users(args: argparse.Namespace) -> dict[str, str]:
    entries = list(args.auth_user or [])
    if args.auth_users_file is not None:
        try:
            text = args.auth_users_file.read_text(encoding="utf-8")
        except OSError as exc:
            raise CliError(f"cannot read {args.auth_users_file}: {exc.strerror or exc}") from None
        entries += [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]
    users: dict[str, str] = {}
    for entry in entries:
        user, sep, password = entry.partition(":")
        if not sep or not user.strip() or not password:
            raise CliError("an auth user is USER:PASSWORD (a non-empty user and password)", EXIT_USAGE)
        users[user.strip()] = password
    return users


def _taken_port_hint(exc: OSError, args: argparse.Namespace) -> str:
    """What to run instead when another program holds a port: free ports, and how the clients find them."""
    if exc.errno != errno.EADDRINUSE:
        return ""
    return ("\n  another program listens there. For free ports: tubemq serve --data-dir "
            f"{args.data_dir} --master-port 0 --broker-port 0 --admin-port 0 --detach, then "
            f". {args.data_dir / ENV_FILE} (sets TUBEMQ_MASTER, which the other commands and the "
            "documentation's Python examples read)")


def run(args: argparse.Namespace) -> int:
    from tubemq.server import run_foreground

    config = build_config(args)
    if args.detach:
        from .detach import detach

        if args.ready_timeout <= 0:
            raise CliError("--ready-timeout must be positive", EXIT_USAGE)
        if sys.platform == "win32":  # no sessions to detach into, and probing a pid would end it
            raise CliError("--detach needs a POSIX system: on Windows run `tubemq serve` in its own window",
                           EXIT_USAGE)
        return detach(args, args.argv)
    args.data_dir.mkdir(parents=True, exist_ok=True)
    if args.verbose == 0:
        # the listener lines ("master listening on ...") are the point of a foreground server
        logging.getLogger("tubemq.server").setLevel(logging.INFO)
    from tubemq.errors import DataDirLockedError, ServerBindError

    try:
        result = run_foreground(config)
    except ServerBindError as exc:  # names the role and port: "master port 8715 on 127.0.0.1: ..."
        raise CliError(f"cannot start the server: {exc}{_taken_port_hint(exc, args)}",
                       port_in_use_status(exc)) from None
    except DataDirLockedError as exc:  # another live server writes to this directory
        raise CliError(f"cannot start the server: {exc}") from None
    except OSError as exc:
        raise CliError(f"cannot start the server: {exc.strerror or exc}") from None
    return int(result or 0)
