"""How long ``tubemq.Producer(address)`` takes to fail on each kind of wrong address, and what it says.

Run: ``python bench/wrong_address.py``. Starts its own listeners and embedded cluster on 127.0.0.1.
"""

from __future__ import annotations

import logging
import socket
import tempfile
import time
from typing import Any

import tubemq
from tubemq.server import EmbeddedCluster


def attempt(name: str, address: str, **options: Any) -> None:
    t0 = time.monotonic()
    try:
        with tubemq.Producer(address, **options):
            print(f"{name:28s} {time.monotonic() - t0:5.1f} s  connected")
    except Exception as exc:  # noqa: BLE001 - a measurement script: report whatever it was
        print(f"{name:28s} {time.monotonic() - t0:5.1f} s  {type(exc).__name__}: {str(exc)[:150]}")


def main() -> None:
    logging.disable(logging.WARNING)
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    attempt("silent listener", f"127.0.0.1:{silent.getsockname()[1]}")
    silent.close()
    attempt("http:// master", "http://127.0.0.1:8080/webapi.htm")
    with EmbeddedCluster(data_dir=tempfile.mkdtemp(), master_port=0, broker_port=0, admin_port=0) as cluster:
        admin = cluster.admin_url.split("//", 1)[1].split("/", 1)[0]
        attempt("admin (HTTP) port", admin)
        attempt("broker port as master", cluster.broker_address)
        attempt("tls=True vs plaintext", cluster.master_address, tls=True, tls_verify=False)
        attempt("the right address", cluster.master_address)


if __name__ == "__main__":
    main()
