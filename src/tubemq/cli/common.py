"""Shared plumbing of the ``tubemq`` command: exit codes, one-line error messages, master resolution.

Why a module of its own: every subcommand must turn expected failures (dead master, unknown topic,
bad input) into ONE clear line on stderr and exit status 1, never a traceback; and every subcommand
resolves ``--master`` the same way.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TextIO, TypeVar

# a taken port's exit status and the foreground run: the server's own (it must not import the CLI)
from ..server.foreground import EXIT_PORT_IN_USE, port_in_use_status, run_server_foreground  # noqa: F401

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, the shell convention for "stopped by Ctrl-C"

#: Where `tubemq serve` listens by default; the implicit --master of the client subcommands.
DEFAULT_MASTER = "127.0.0.1:8715"
DEFAULT_ADMIN_PORT = 8080
#: The admin API of `tubemq serve` with its default ports (the pair that goes with DEFAULT_MASTER).
DEFAULT_ADMIN_URL = f"http://127.0.0.1:{DEFAULT_ADMIN_PORT}/webapi.htm"
ENV_MASTER = "TUBEMQ_MASTER"
ENV_ADMIN_URL = "TUBEMQ_ADMIN_URL"


class CliError(Exception):
    """An expected failure: printed as one line ``tubemq: <message>`` and mapped to an exit code."""

    def __init__(self, message: str, code: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def eprint(*parts: Any, file: TextIO | None = None) -> None:
    """Print a diagnostic line to stderr (stdout stays clean for data)."""
    print(*parts, file=file or sys.stderr, flush=True)


def plain(text: str) -> str:
    """Docstring text for ``--help``: RST literals (````x````) become plain words, lines are re-flowed."""
    return " ".join(text.replace("``", "").split())


def note(message: str) -> None:
    eprint(f"tubemq: {message}")


def split_addresses(master: str) -> list[str]:
    """'h1:p1,h2:p2' (or a tubemq:// DSN) -> ['h1:p1', 'h2:p2'] with usage errors for bad entries."""
    text = master.strip()
    if text.lower().startswith(("http://", "https://")):
        raise CliError(f"--master {text} is a web (admin API) address: the master's RPC address is HOST:PORT "
                       "(usually port 8715); give a web address as --admin-url", EXIT_USAGE)
    for scheme in ("tubemq://", "tubemqs://"):
        if text.startswith(scheme):
            text = text[len(scheme) :].split("?", 1)[0].split("/", 1)[0]
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if "://" in part or part.startswith("/"):
            raise CliError(
                f"bad master address {part!r}: --master is HOST:PORT of a master's RPC port (e.g. "
                f"127.0.0.1:8715 or localhost:8715), not a URL; an admin API URL goes to --admin-url",
                EXIT_USAGE,
            )
        host, sep, port = part.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise CliError(f"bad master address {part!r}: expected HOST:PORT", EXIT_USAGE)
        out.append(part)
    if not out:
        raise CliError(f"bad master address {master!r}: expected HOST:PORT[,HOST:PORT...]", EXIT_USAGE)
    return out


def resolve_master(master: str | None, *, quiet: bool = False) -> str:
    """The explicit --master, else $TUBEMQ_MASTER, else the `tubemq serve` default (said on stderr)."""
    if master:
        split_addresses(master)
        return master
    env = os.environ.get(ENV_MASTER)
    if env:
        split_addresses(env)
        if not quiet:
            note(f"no --master given; using ${ENV_MASTER}={env}")
        return env
    if not quiet:
        note(
            f"no --master given; using the embedded server default {DEFAULT_MASTER} "
            "(start one with `tubemq serve --data-dir DIR`)"
        )
    return DEFAULT_MASTER


def resolve_admin_url(admin_url: str | None, master: str | None, admin_port: int | None = None) -> str:
    """The admin endpoint to use, said on stderr; never a silent guess.

    The admin port of a cluster cannot be derived from its master address (a master on 18715 may
    sit next to another cluster's 8080), so: --admin-url, else --admin-port on the host of
    --master (both given by the user), else $TUBEMQ_ADMIN_URL, else what a live local `tubemq serve`
    of that master published (server/endpoints.py), else - only when no master was
    named at all - the `tubemq serve` default pair (master 8715, admin 8080). A --master (or
    $TUBEMQ_MASTER) without an admin endpoint is a usage error.
    """
    if admin_url:
        note(f"admin API: {admin_url} (--admin-url)")
        return admin_url
    env_master = os.environ.get(ENV_MASTER)
    if admin_port is not None:
        host = split_addresses(resolve_master(master))[0].rpartition(":")[0]
        url = f"http://{host}:{admin_port}/webapi.htm"
        note(f"admin API: {url} (host of the master, --admin-port {admin_port})")
        return url
    env_url = os.environ.get(ENV_ADMIN_URL)
    if env_url:
        note(f"admin API: {env_url} (${ENV_ADMIN_URL})")
        return env_url
    if master or env_master:
        for address in split_addresses(resolve_master(master)):
            found = lookup_published(address)
            if found is not None and found.admin_url:
                note(f"admin API: {found.admin_url} (published by the local `tubemq serve` of {address})")
                return found.admin_url
        named = f"--master {master}" if master else f"${ENV_MASTER}={env_master}"
        raise CliError(
            f"{named} does not say where its admin API is: pass --admin-url http://HOST:PORT/webapi.htm "
            f"(a real master's web port, `tubemq serve --admin-port`), --admin-port PORT, or set ${ENV_ADMIN_URL}",
            EXIT_USAGE,
        )
    note(f"admin API: {DEFAULT_ADMIN_URL} (no --master or --admin-url given: the `tubemq serve` default)")
    return DEFAULT_ADMIN_URL


def lookup_published(address: str) -> Any:
    """The endpoints a live local `tubemq serve` published for ``address``, a host name resolved too
    (``localhost:8715`` finds the server published as ``127.0.0.1:8715``); None when there is none."""
    from .._endpoints import lookup

    found = lookup(address)
    host, _, port = address.strip().rpartition(":")
    if found is not None or not port.isdigit():
        return found
    try:
        infos = socket.getaddrinfo(host.strip("[]"), int(port), type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return None
    for info in infos:
        ip = str(info[4][0])
        found = lookup(f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}")
        if found is not None:
            return found
    return None


#: Consumers of the command line heartbeat every 2 s instead of Java's 13 s: partition assignments
#: arrive in heartbeat answers, and a person waiting for `tubemq consume` should not wait 13 s for the
#: first message. (-X heartbeat_period_ms=13000 restores the library default.)
CONSUMER_CLI_DEFAULTS = {"heartbeat_period_ms": "2000"}


def client_target(master: str, options: Sequence[str] | None, defaults: dict[str, str] | None = None) -> str:
    """The master argument for Producer/Consumer: ``master`` plus ``-X key=value`` client options as a DSN.

    The client config parses and validates DSN options itself (unknown names and bad values raise
    ConfigError naming the option), so the command line accepts every ClientConfig /
    ProducerConfig / ConsumerConfig field without listing them twice. ``defaults`` apply unless the
    user gave the same option.
    """
    pairs = []
    for item in options or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CliError(f"bad -X {item!r}: expected OPTION=VALUE (a client config field)", EXIT_USAGE)
        _check_option(key.strip(), value)
        pairs.append((key.strip(), value))
    given = {k for k, _ in pairs} | set(urllib.parse.parse_qs(master.partition("?")[2]))
    pairs += [(k, v) for k, v in (defaults or {}).items() if k not in given]
    if not pairs:
        return master
    text = master.strip()
    scheme = "tubemq://"
    query = ""
    for s in ("tubemq://", "tubemqs://"):
        if text.startswith(s):
            scheme = s
            text, _, query = text[len(s) :].partition("?")
    extra = urllib.parse.urlencode(pairs)
    return f"{scheme}{text}?{query + '&' if query else ''}{extra}"


def _check_option(key: str, value: str) -> None:
    """A -X value the client config cannot convert: say so about -X, not about a DSN the user never wrote.

    Unknown names are left to the client (producer and consumer accept different ones, and its
    ConfigError names the option); the conversion is the config's own (``config._convert``).
    """
    import dataclasses

    from tubemq.config import ConsumerConfig, ProducerConfig, _convert
    from tubemq.errors import ConfigError

    for cls in (ProducerConfig, ConsumerConfig):
        field = next((f for f in dataclasses.fields(cls) if f.name == key), None)
        if field is None:
            continue
        try:
            _convert(cls, {key: value})
        except ConfigError:
            kind = {"int": "an integer", "float": "a number", "bool": "true or false"}.get(
                type(field.default).__name__ if field.default is not dataclasses.MISSING else str(field.type),
                str(field.type))
            raise CliError(f"bad -X {key}={value!r}: expected {kind}", EXIT_USAGE) from None
        return


@contextlib.contextmanager
def config_errors_are_usage() -> Iterator[None]:
    """A ConfigError while building a client is the user's option: exit 2 with the field named."""
    from tubemq.errors import ConfigError

    try:
        yield
    except ConfigError as exc:
        raise CliError(f"bad client option {exc}", EXIT_USAGE) from None


T = TypeVar("T")


def resolve_target(master: str | None, options: Sequence[str] | None,
                   defaults: dict[str, str] | None = None) -> tuple[str, str]:
    """``(master, client target)`` from ``--master`` and ``-X``: a bad option fails before any connection."""
    resolved = resolve_master(master)
    return resolved, client_target(resolved, options, defaults)


def open_client(cls: Callable[..., T], target: str, **kwargs: Any) -> T:
    """A Producer/Consumer for ``target``; a ConfigError from its options exits 2 naming the field."""
    with config_errors_are_usage():
        return cls(target, **kwargs)


def check_reachable(master: str, timeout: float = 3.0) -> None:
    """Fail fast with a one-line message when no master address accepts a TCP connection.

    The client sessions retry registration forever by design (a real cluster comes back); a command
    line tool must instead say promptly that nothing is listening.
    """
    errors = []
    for addr in split_addresses(master):
        host, _, port = addr.rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
                return
        except OSError as exc:
            errors.append(f"{addr} ({describe_os_error(exc)})")
    raise CliError("cannot reach the TubeMQ master at " + ", ".join(errors) + "; is it running?")


def describe_os_error(exc: OSError) -> str:
    if isinstance(exc, socket.timeout | TimeoutError):
        return "timed out"
    if exc.errno == errno.ECONNREFUSED:
        return "connection refused"
    if isinstance(exc, socket.gaierror):
        return f"unknown host: {exc.strerror or exc}"
    return exc.strerror or str(exc) or type(exc).__name__


def describe_error(exc: BaseException) -> str:
    """One line for an exception the user should understand without a traceback."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    name = type(exc).__name__
    if isinstance(exc, OSError) and not text:
        return name
    return f"{name}: {text}" if text else name


def parse_attrs(items: Sequence[str] | None) -> dict[str, str]:
    """['k=v', 'a=b'] -> {'k': 'v', 'a': 'b'}; a usage error for anything else."""
    out: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CliError(f"bad --attr {item!r}: expected KEY=VALUE", EXIT_USAGE)
        if any(c in key + value for c in ",="):
            raise CliError(f"bad --attr {item!r}: keys and values cannot contain ',' or '='", EXIT_USAGE)
        out[key] = value
    return out


@dataclass
class EmbeddedHandle:
    """A running temporary embedded cluster plus the directory it lives in."""

    cluster: Any
    data_dir: str

    @property
    def master(self) -> str:
        return str(self.cluster.master_address)

    @property
    def admin_url(self) -> str:
        return str(self.cluster.admin_url)


def free_port() -> int:
    """A currently free TCP port on 127.0.0.1 (the OS picks it). Another process may take it before
    the server binds it: a server started in a child process goes through start_on_free_ports."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


#: Starts of a server process on freshly picked ports before start_on_free_ports gives up.
PORT_ATTEMPTS = 5


def start_on_free_ports(
    spawn: Callable[[list[int]], subprocess.Popen[bytes]], count: int, timeout: float,
    *, attempts: int = PORT_ATTEMPTS,
) -> tuple[subprocess.Popen[bytes], list[int]]:
    """Start a server process (``spawn(ports)``) on ``count`` free ports; wait until it listens on all.

    A child has to be told its ports up front, and a port picked free can be taken before the child
    binds it (by any connection's ephemeral port): a child that exits with EXIT_PORT_IN_USE is started
    again on new ports, ``attempts`` times in all. Returns the process and its ports; the process has
    exited when it failed otherwise (or on every attempt): the caller reports that with its log.
    """
    for _ in range(attempts):
        ports = [free_port() for _ in range(count)]
        proc = spawn(ports)
        if _wait_listening(proc, ports, timeout) or proc.wait(10) != EXIT_PORT_IN_USE:
            break
    return proc, ports


@dataclass
class ServerProcessHandle:
    """A temporary embedded server running as a child process (``python -m tubemq.server``)."""

    process: subprocess.Popen[bytes]
    data_dir: str
    master: str
    admin_url: str

    def create_topic(self, name: str, partitions: int = 3) -> None:
        from .admin import AdminClient

        AdminClient(self.admin_url, timeout=30.0).create_topic(name, partitions=partitions)


@contextlib.contextmanager
def temporary_server_process(
    *, keep: bool = False, quiet: bool = False, startup_timeout: float = 60.0, balance_period_ms: int = 1000
) -> Iterator[ServerProcessHandle]:
    """Start the embedded server in a child process on free ports; stop it and delete its data after.

    The child is :mod:`tubemq.cli.child_server`: ``tubemq serve``'s server plus a watchdog on its stdin.

    Why a process and not a thread: the server and the client then run on two cores instead of
    sharing one interpreter lock, which roughly doubles what a laptop can push through the demo.
    The child gets its own session so the user's Ctrl-C reaches only us: in-flight work is settled
    against a live server before we stop it.
    """
    data_dir = tempfile.mkdtemp(prefix="tubemq-")
    log_path = os.path.join(data_dir, "server.log")
    proc: subprocess.Popen[bytes] | None = None

    def spawn(ports: list[int]) -> subprocess.Popen[bytes]:
        nonlocal proc
        mport, bport, aport = ports
        config = {"data_dir": os.path.join(data_dir, "data"), "master_port": mport, "broker_port": bport,
                  "admin_port": aport, "balance_period_ms": balance_period_ms}
        if not keep:
            config["cleanup_dir"] = data_dir
        with open(log_path, "ab") as log:
            # stdin stays open as the child's lifeline: it exits when we do, even after kill -9
            proc = subprocess.Popen(
                [sys.executable, "-m", "tubemq.cli.child_server", json.dumps(config)],
                stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )
        return proc

    try:
        started, (mport, _, aport) = start_on_free_ports(spawn, 3, startup_timeout)
        if started.poll() is not None:
            raise CliError(f"the embedded server did not start (exit {started.returncode}): {_tail(log_path)}")
        handle = ServerProcessHandle(started, data_dir, f"127.0.0.1:{mport}", f"http://127.0.0.1:{aport}/webapi.htm")
        if not quiet:
            note(f"started an embedded TubeMQ server (pid {started.pid}, master {handle.master}, data in {data_dir})")
        yield handle
    finally:
        if proc is not None and proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        if not keep:
            shutil.rmtree(data_dir, ignore_errors=True)


def _wait_listening(proc: subprocess.Popen[bytes], ports: Sequence[int], timeout: float) -> bool:
    """True once every port accepts connections; False if the process died first."""
    deadline = time.monotonic() + timeout
    pending = list(ports)
    while pending:
        if proc.poll() is not None:
            return False
        if time.monotonic() > deadline:
            proc.kill()
            raise CliError(f"the embedded server did not listen within {timeout:g} s")
        try:
            with socket.create_connection(("127.0.0.1", pending[0]), timeout=0.5):
                pending.pop(0)
        except OSError:
            time.sleep(0.05)
    return True


def _tail(path: str, limit: int = 600) -> str:
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8", "replace").strip()
    except OSError:
        return "(no log)"
    lines = [line for line in text.splitlines() if line.strip()]
    return (lines[-1] if lines else "(empty log)")[-limit:]


@contextlib.contextmanager
def temporary_cluster(*, keep: bool = False, quiet: bool = False, **server_options: Any) -> Iterator[EmbeddedHandle]:
    """Start an embedded master+broker in a fresh temp dir; stop it and delete the dir afterwards."""
    try:
        from tubemq.server import EmbeddedCluster
    except ImportError as exc:  # pragma: no cover - the server ships with the package
        raise CliError(f"the embedded server is not available: {exc}") from exc
    data_dir = tempfile.mkdtemp(prefix="tubemq-")
    try:
        cluster = EmbeddedCluster(data_dir=data_dir, **server_options)
        cluster.start()
        try:
            if not quiet:
                note(f"started an embedded TubeMQ server (master {cluster.master_address}, data in {data_dir})")
            yield EmbeddedHandle(cluster, data_dir)
        finally:
            cluster.stop()
    finally:
        if not keep:
            shutil.rmtree(data_dir, ignore_errors=True)


@dataclass
class ServerTarget:
    """The server a command runs against: its master address, how the summary names it, and how to
    create a topic on it (through the admin API; a no-op that says so where there is none)."""

    master: str
    where: str
    create_topic: Callable[[str, int], None]


@contextlib.contextmanager
def temporary_server(*, in_process: bool = False, keep: bool = False) -> Iterator[ServerTarget]:
    """A temporary embedded server for a command run without ``--master``: a child process by default
    (see :func:`temporary_server_process`: server and client on two cores) or, with ``in_process``, an
    embedded cluster in this process (:func:`temporary_cluster`)."""
    if in_process:
        with temporary_cluster(keep=keep) as handle:
            yield ServerTarget(handle.master, f"embedded server at {handle.master} (in-process)",
                               lambda name, n: handle.cluster.create_topic(name, partitions=n))
    else:
        with temporary_server_process(keep=keep) as proc:
            yield ServerTarget(proc.master, f"embedded server at {proc.master} (pid {proc.process.pid})",
                               proc.create_topic)
