"""``python -m tubemq.server --data-dir DIR``: the embedded server in the foreground (no CLI deps)."""

from __future__ import annotations

import argparse
import logging
import sys

from ..errors import ConfigError
from .config import FLUSH_POLICIES, ServerConfig
from .foreground import run_server_foreground


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tubemq.server", description="embedded TubeMQ master + broker")
    p.add_argument("--data-dir", required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--master-port", type=int, default=8715)
    p.add_argument("--broker-port", type=int, default=8123)
    p.add_argument("--admin-port", type=int, default=8080)
    p.add_argument("--broker-id", type=int, default=1)
    p.add_argument("--brokers", type=int, default=1, help="brokers in this process (ports counting up)")
    p.add_argument("--first-balance-delay-ms", type=int, default=0, help="-1 = a real master's timing")
    p.add_argument("--flush", choices=FLUSH_POLICIES, default="interval")
    p.add_argument("--flush-interval-ms", type=int, default=1000)
    p.add_argument("--cache-flush-interval-ms", type=int, default=20000)
    p.add_argument("--balance-period-ms", type=int, default=1000)
    p.add_argument("--admin-token", default=None)
    p.add_argument("--tls-cert", default=None)
    p.add_argument("--tls-key", default=None)
    p.add_argument("--log-level", default="INFO")
    args = p.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        config = ServerConfig(
            data_dir=args.data_dir,
            host=args.host,
            master_port=args.master_port,
            broker_port=args.broker_port,
            admin_port=args.admin_port,
            broker_id=args.broker_id,
            brokers=args.brokers,
            first_balance_delay_ms=args.first_balance_delay_ms,
            flush=args.flush,
            flush_interval_ms=args.flush_interval_ms,
            cache_flush_interval_ms=args.cache_flush_interval_ms,
            balance_period_ms=args.balance_period_ms,
            admin_token=args.admin_token,
            tls_cert=args.tls_cert,
            tls_key=args.tls_key,
        )
    except ConfigError as exc:
        print(f"bad option: {exc}", file=sys.stderr)
        return 2
    return run_server_foreground(config)  # one line and `tubemq serve`'s status on a taken port


if __name__ == "__main__":
    sys.exit(main())
