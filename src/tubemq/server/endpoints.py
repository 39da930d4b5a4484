"""Where a local ``tubemq serve`` publishes its addresses: the files live in :mod:`tubemq._endpoints`, below
both the server (which publishes) and the clients (which look up), so neither imports the other."""

from .._endpoints import ENV_DIR, Endpoints, lookup, publish, runtime_dir, withdraw

__all__ = ["ENV_DIR", "Endpoints", "lookup", "publish", "runtime_dir", "withdraw"]
