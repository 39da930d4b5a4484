"""EmbeddedCluster lifecycle API: ports, broker down/up, master restart, standby, async twin."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import pytest
from _support import HAS_PROC_FS, wait_for

from tubemq.errors import ConfigError
from tubemq.protocol import constants as C
from tubemq.protocol import master_pb
from tubemq.server import EmbeddedCluster, EmbeddedServer, ServerConfig
from tubemq.server.testing import FAST_CLIENT_TIMERS as FAST_SERVER

from ._raw import RawClient


def preg(address: str) -> Any:
    with RawClient(address) as c:
        req = master_pb.RegisterRequestP2M(clientId="p-cluster", brokerCheckSum=-1, hostName="127.0.0.1")
        return c.call(1, req, service_type=1)


def test_addresses_and_topics(cluster: Any) -> None:
    assert cluster.master_address.startswith("127.0.0.1:")
    assert cluster.admin_url.endswith("/webapi.htm")
    conf = cluster.create_topic("topic_a", partitions=2, stores=2)
    assert conf.partition_ids() == [0, 1, 10000, 10001]
    assert [t.name for t in cluster.topics()] == ["topic_a"]
    with pytest.raises(ConfigError):
        cluster.create_topic("topic_a")
    assert cluster.delete_topic("topic_a") and not cluster.delete_topic("topic_a")


def test_broker_down_and_up_on_the_same_port(cluster: Any) -> None:
    cluster.create_topic("topic_b", partitions=1)
    address = cluster.broker_address
    with RawClient(address) as c:
        assert c.send("topic_b", 0, b"one").success
        assert c.register("g", "topic_b", 0).success
    cluster.stop_broker()
    with pytest.raises(OSError):
        socket.create_connection(tuple(address.rsplit(":", 1)), timeout=2).close()  # type: ignore[arg-type]
    cluster.start_broker()
    assert cluster.broker_address == address
    with RawClient(address) as c:
        assert c.send("topic_b", 0, b"two").appendOffset == 28  # data kept
        assert c.fetch("g", "topic_b", 0).errCode == 411  # registrations were lost


def test_master_restart_and_standby(cluster: Any) -> None:
    address = cluster.master_address
    assert preg(address).status == 0
    cluster.set_standby(True)
    r = preg(address)
    assert r.status == 1 and r.exception_name == C.EXC_STANDBY
    cluster.set_standby(False)
    cluster.restart_master()
    assert cluster.master_address == address
    assert preg(address).status == 0


def test_bad_options_name_the_field(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as exc:
        EmbeddedCluster(data_dir=tmp_path, flush="sometimes")
    assert exc.value.field == "flush"
    with pytest.raises(ConfigError) as exc:
        EmbeddedCluster(data_dir=tmp_path, no_such_option=1)
    assert exc.value.field == "no_such_option"
    with pytest.raises(ConfigError):
        ServerConfig(data_dir=tmp_path, tls_cert="x.pem")


def test_async_twin(tmp_path: Path) -> None:
    async def main() -> None:
        cfg = ServerConfig(data_dir=tmp_path, **FAST_SERVER)
        async with EmbeddedServer(cfg) as server:
            server.create_topic("topic_c", partitions=1)
            loop = asyncio.get_running_loop()

            def use() -> bool:
                with RawClient(server.broker_address) as c:
                    return bool(c.send("topic_c", 0, b"async").success)

            assert await loop.run_in_executor(None, use)

    asyncio.run(asyncio.wait_for(main(), 30))


def _open_fds() -> int | None:
    """Open file descriptors of this process (None where /proc is not there)."""
    return len(list(Path("/proc/self/fd").iterdir())) if HAS_PROC_FS else None


@pytest.mark.parametrize("role", ["master", "broker", "admin"])
def test_a_taken_port_is_a_typed_error_and_nothing_stays_up(tmp_path: Path, role: str) -> None:
    """The port is held by a listening socket for the whole test (no race); the cluster must name it,
    chain the OSError and close whatever it had started before (brokers start first, the admin API last)."""
    import errno
    import threading

    from tubemq.errors import ServerBindError

    def server_threads() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name == "tubemq-embedded-server" and t.is_alive()]

    for t in server_threads():  # a cluster of an earlier test in this (xdist worker) process, ending
        t.join(15)
    earlier = set(server_threads())
    with socket.create_server(("127.0.0.1", 0)) as held:
        port = held.getsockname()[1]
        baseline = _open_fds()
        with pytest.raises(ServerBindError) as err:
            EmbeddedCluster(data_dir=tmp_path / "d", brokers=2, **{f"{role}_port": port}, **FAST_SERVER).start()
        exc = err.value
        assert exc.role == role and exc.port == port and exc.field == f"{role}_port"
        assert exc.errno == errno.EADDRINUSE and isinstance(exc, OSError)
        assert isinstance(exc.__cause__, OSError) and exc.__cause__.errno == errno.EADDRINUSE
        assert f"{role} port {port} on 127.0.0.1" in str(exc) and "already in use" in str(exc)
        # the failed start's own thread ends (bounded: on a loaded machine it may still be finishing)
        wait_for(lambda: not [t for t in server_threads() if t not in earlier], 15, "the server thread to end")
        assert _open_fds() == baseline  # listeners, store files and the loop's selector all closed
    # the data directory is usable at once by the next cluster
    with EmbeddedCluster(data_dir=tmp_path / "d", **FAST_SERVER) as c:
        c.create_topic("after_failure", partitions=1)
