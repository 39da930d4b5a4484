"""Logging hygiene: the library installs no handlers, and no password or token reaches a log line."""

from __future__ import annotations

import io
import logging
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from _support import drain

import tubemq
import tubemq.client.auth as client_auth
from tubemq.errors import AuthenticationError
from tubemq.server import EmbeddedCluster
from tubemq.server.testing import FAST_CLIENT_TIMERS as FAST_TIMERS

FAST: dict[str, Any] = {"heartbeat_period_ms": 200, "register_retry_wait_ms": 100, "rpc_timeout_ms": 3000,
                        "connect_timeout_ms": 1000}

_NO_HANDLERS_SCRIPT = textwrap.dedent(
    """
    import asyncio, importlib, logging, pkgutil, sys, tempfile, time

    root_before = list(logging.getLogger().handlers)
    import tubemq, tubemq.aio
    skipped = []
    for mod in pkgutil.walk_packages(tubemq.__path__, "tubemq."):
        if mod.name.endswith("__main__"):
            continue  # running the entry points is the application's choice, not an import
        try:
            importlib.import_module(mod.name)
        except ImportError as exc:  # an optional dependency (e.g. pyspark) missing here
            skipped.append(f"{mod.name}: {exc}")
    from tubemq.server import EmbeddedCluster
    from tubemq.server.testing import FAST_CLIENT_TIMERS as FAST_TIMERS

    fast = {"heartbeat_period_ms": 200, "rpc_timeout_ms": 3000, "connect_timeout_ms": 1000}
    with tempfile.TemporaryDirectory() as d, EmbeddedCluster(data_dir=d, **FAST_TIMERS) as c:
        c.create_topic("logs", partitions=2)
        with tubemq.Producer(c.master_address, **fast) as p:
            for i in range(20):
                p.send_async("logs", b"m%d" % i, callback=lambda r, e: None)
            p.send_async("no_such_topic", b"x").exception(30)  # a failure path logs too
            p.flush(30)
            p.metrics()
        with tubemq.Consumer(c.master_address, group="g", topics=["logs"], consume_from="earliest",
                             msg_not_found_wait_ms=20, **fast) as cons:
            got, deadline = 0, time.monotonic() + 30
            while got < 20 and time.monotonic() < deadline:
                b = cons.poll(0.2)
                if b is not None:
                    got += len(b)
                    cons.confirm(b)
            assert got == 20, got
            cons.metrics()

        async def aio() -> None:
            async with tubemq.aio.Producer(c.master_address, **fast) as ap:
                await ap.send("logs", b"aio")

        asyncio.run(asyncio.wait_for(aio(), 30))
    # only the NullHandler on "tubemq" (library convention: no "no handler" fallback output, no real output)
    assert [type(h) for h in logging.getLogger("tubemq").handlers] == [logging.NullHandler]
    bad = {name: lg.handlers for name, lg in logging.root.manager.loggerDict.items()
           if (name == "tubemq" or name.startswith("tubemq.")) and isinstance(lg, logging.Logger)
           and [h for h in lg.handlers if not isinstance(h, logging.NullHandler)]}
    assert not bad, f"handlers installed by the library: {bad}"
    assert logging.getLogger().handlers == root_before, "root logger handlers changed"
    names = [n for n in logging.root.manager.loggerDict if n.startswith("tubemq.")]
    assert all(logging.getLogger(n).propagate for n in names)
    assert all(logging.getLogger(n).level == logging.NOTSET for n in names + ["tubemq"]), "levels set"
    print("OK", len(names), "tubemq loggers;", "skipped:", skipped)
    """
)


def test_importing_and_using_tubemq_installs_no_log_handlers() -> None:
    """A fresh interpreter (pytest installs its own handlers): import every module, run the clients."""
    proc = subprocess.run([sys.executable, "-c", _NO_HANDLERS_SCRIPT], capture_output=True, text=True,
                          timeout=180, cwd=Path(__file__).parent)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("OK"), proc.stdout + proc.stderr
    assert int(proc.stdout.split()[1]) >= 10  # the modules really log under tubemq.*


def test_no_password_or_token_in_debug_logs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    password = "Sup3r-Secret-Pa55w0rd"
    signatures: set[str] = set()
    real_signature = client_auth.signature

    def recording_signature(*args: Any, **kwargs: Any) -> str:
        sig = real_signature(*args, **kwargs)
        signatures.add(sig)
        return sig

    monkeypatch.setattr(client_auth, "signature", recording_signature)
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))  # tracebacks included
    logger = logging.getLogger("tubemq")
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    tokens: set[str] = set()
    try:
        with EmbeddedCluster(data_dir=tmp_path / "data", auth_enabled=True, auth_users={"alice": password},
                             **FAST_TIMERS) as c:
            c.create_topic("secret", partitions=2)
            creds = {"auth_user": "alice", "auth_password": password}
            with tubemq.Producer(c.master_address, **creds, **FAST) as p:
                for i in range(20):
                    p.send("secret", b"s%d" % i)
                tokens |= {p._core.session.auth_token, str(p._core.session.visit_token)}
                p.metrics()
            with tubemq.Consumer(c.master_address, group="g_secret", topics=["secret"], consume_from="earliest",
                                 msg_not_found_wait_ms=20, **creds, **FAST) as cons:
                assert len(drain(cons, 20, timeout=30)) == 20
                tokens |= {cons._core.session.auth_token, str(cons._core.session.visit_token)}
                cons.metrics()
            with pytest.raises(AuthenticationError) as ei:  # a refused login logs its retries
                tubemq.Producer(c.master_address, auth_user="alice", auth_password="wrong-" + password, **FAST)
            assert password not in str(ei.value)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    text = out.getvalue()
    tokens.discard("")
    assert len(text.splitlines()) > 20 and "DEBUG" in text  # the run really logged at DEBUG
    assert len(signatures) >= 4 and len(tokens) >= 3  # signed requests and issued tokens existed
    assert password not in text
    leaked = [s for s in signatures | tokens if s in text]
    assert not leaked, f"secrets in the log: {leaked}"
