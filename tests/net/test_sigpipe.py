"""The blocking producer's round trip writes from the application's thread: an application that reset
SIGPIPE to SIG_DFL must get a typed error from a write to a dead socket, not be killed by the signal.

Runs in a child process (the signal disposition is process-wide). The first part makes the dead-socket
write deterministic: the peer resets the connection before the blocking channel writes, so every write
really reaches the dead socket (ECONNRESET, then EPIPE, which raises SIGPIPE unless the write says
MSG_NOSIGNAL). The second part does blocking Producer sends to an embedded broker that went down."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGPIPE"), reason="no SIGPIPE on this platform")

CHILD = textwrap.dedent(
    """
    import signal, socket, struct, sys, tempfile, time

    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # what some applications (and daemons) do

    import tubemq
    from tubemq import codec
    from tubemq._bridge.channel import BlockingChannel, Unsent
    from tubemq.errors import TubeMQError
    from tubemq.server import EmbeddedCluster
    from tubemq.server.testing import FAST_CLIENT_TIMERS as FAST_TIMERS

    def build(serial, arg):
        return codec.encode_request(serial, 3, 13, b"x" * 100, timeout_ms=3000)

    server = socket.create_server(("127.0.0.1", 0))
    channel = BlockingChannel(f"127.0.0.1:{server.getsockname()[1]}", 3.0, 3.0)
    peer, _ = server.accept()
    peer.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    peer.close()  # RST
    server.close()
    time.sleep(0.3)
    outcomes = []
    for _ in range(5):
        try:
            channel.round_trip(build, None, 3.0)
            outcomes.append("answered")
        except (Unsent, TubeMQError) as exc:
            outcomes.append(type(exc).__name__)
    print("direct", outcomes, flush=True)

    with tempfile.TemporaryDirectory() as d, EmbeddedCluster(data_dir=d, **FAST_TIMERS) as c:
        c.create_topic("sig", partitions=1)
        with tubemq.Producer(c.master_address, rpc_timeout_ms=3000, pool="private") as p:
            p.send("sig", b"ok")
            c.stop_broker()
            errors = set()
            for _ in range(3):  # each waits for the broker up to rpc_timeout_ms, then fails typed
                try:
                    p.send("sig", b"after")
                except TubeMQError as exc:
                    errors.add(type(exc).__name__)
            print("producer", sorted(errors), flush=True)
    print("alive", flush=True)
    """
)


def test_direct_writes_to_a_dead_socket_raise_typed_errors_with_sigpipe_default() -> None:
    r = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, timeout=180, env=dict(os.environ))
    out, err = r.stdout.decode(), r.stderr.decode()
    assert r.returncode != -signal.SIGPIPE, f"killed by SIGPIPE; stdout: {out!r}"
    assert r.returncode == 0, err
    lines = out.splitlines()
    # every write to the dead socket failed typed (none answered), and nothing was killed
    assert lines[0].startswith("direct [") and "answered" not in lines[0], out
    assert set(eval(lines[0][len("direct "):])) <= {"Unsent", "ConnectionLostError"}, out
    assert lines[1].startswith("producer [") and lines[1] != "producer []", out
    assert lines[-1] == "alive", out


def test_the_write_path_says_msg_nosignal_where_it_exists() -> None:
    """Where the platform has MSG_NOSIGNAL the blocking channel writes with it (the child test above
    cannot tell a platform that has no SIGPIPE on sockets from one that ignores the flag)."""
    from tubemq._bridge import channel

    assert channel.plain.SEND_FLAGS == getattr(socket, "MSG_NOSIGNAL", 0)
