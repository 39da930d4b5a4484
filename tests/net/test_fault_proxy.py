"""``tubemq.testing.FaultProxy`` on its own: real sockets on 127.0.0.1 through the proxy to a small
echo server (threads), every fault checked from both ends of the connection."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
from _support import wait_for

from tubemq.testing import FaultProxy


class EchoServer:
    """Echoes what each connection sends; remembers how each connection ended (``eof`` / ``reset``)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.ends: list[str] = []
        self.received = 0
        self.accepted = 0
        self.stop = False
        self.threads = [threading.Thread(target=self._accept, daemon=True)]
        self.threads[0].start()

    def _accept(self) -> None:
        self.sock.settimeout(0.2)
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted += 1
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self.threads.append(t)
            t.start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(30)
            while True:
                try:
                    data = conn.recv(65536)
                except ConnectionResetError:
                    self.ends.append("reset")
                    return
                except OSError:
                    self.ends.append("error")
                    return
                if not data:
                    self.ends.append("eof")
                    return
                self.received += len(data)
                try:
                    conn.sendall(data)
                except OSError:
                    self.ends.append("error")
                    return

    def close(self) -> None:
        self.stop = True
        self.sock.close()


@pytest.fixture
def echo() -> Iterator[EchoServer]:
    server = EchoServer()
    yield server
    server.close()


@pytest.fixture
def proxy(echo: EchoServer) -> Iterator[FaultProxy]:
    with FaultProxy("127.0.0.1", echo.port) as p:
        yield p


def connect(proxy: FaultProxy, timeout: float = 5.0) -> socket.socket:
    s = socket.create_connection((proxy.host, proxy.port), timeout=timeout)
    s.settimeout(timeout)
    return s


def roundtrip(s: socket.socket, data: bytes = b"ping") -> bytes:
    s.sendall(data)
    got = b""
    while len(got) < len(data):
        chunk = s.recv(65536)
        if not chunk:
            break
        got += chunk
    return got


def silent(s: socket.socket, seconds: float = 0.5) -> bool:
    """Nothing arrives (no data, no EOF, no reset) for ``seconds``."""
    s.settimeout(seconds)
    try:
        s.recv(1)
    except TimeoutError:
        return True
    except OSError:
        return False
    return False


def test_forwards_both_ways_and_passes_the_fin(proxy: FaultProxy, echo: EchoServer) -> None:
    assert proxy.address.startswith("127.0.0.1:")
    with connect(proxy) as s:
        assert roundtrip(s, b"hello") == b"hello"
        big = bytes(range(256)) * 4096  # 1 MiB: more than the proxy holds per direction
        t = threading.Thread(target=s.sendall, args=(big,))
        t.start()
        got = bytearray()
        while len(got) < len(big):
            got += s.recv(65536)
        t.join(10)
        assert bytes(got) == big
        s.shutdown(socket.SHUT_WR)
        assert s.recv(1) == b""  # the server saw our FIN and closed: its FIN came back through
    wait_for(lambda: echo.ends == ["eof"], 10, "the server to see the client's FIN")
    wait_for(lambda: proxy.connections == 0, 10, "the link to close")


def test_blackhole_keeps_connections_and_forwards_nothing_until_healed(proxy: FaultProxy,
                                                                       echo: EchoServer) -> None:
    with connect(proxy) as s:
        assert roundtrip(s) == b"ping"
        proxy.blackhole()
        s.sendall(b"held")
        assert silent(s), "a blackholed connection must not answer, close or reset"
        with connect(proxy) as s2:  # new connections are accepted, and just as silent
            s2.sendall(b"new")
            assert silent(s2)
            assert echo.received == 4  # only the first ping reached the server
            proxy.heal()
            s.settimeout(5)
            s2.settimeout(5)
            assert s.recv(16) == b"held"  # what was held back is delivered, as TCP would retransmit it
            assert s2.recv(16) == b"new"
        assert roundtrip(s, b"again") == b"again"
    assert echo.ends.count("reset") == 0


def test_blackhole_holds_a_bounded_amount(echo: EchoServer) -> None:
    with FaultProxy("127.0.0.1", echo.port, buffer_bytes=64 * 1024) as proxy, connect(proxy) as s:
        proxy.blackhole()
        s.setblocking(False)
        sent = 0
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # until the sender's own buffers are full
            try:
                sent += s.send(b"x" * 65536)
            except BlockingIOError:
                time.sleep(0.1)
                try:
                    sent += s.send(b"x" * 65536)
                except BlockingIOError:
                    break
        link = next(iter(proxy._links))
        assert link.up is not None
        print(f"sent {sent} bytes into the blackhole; the proxy holds {link.up.queued}")
        assert link.up.queued <= 64 * 1024 + 65536  # the bound, plus the chunk that crossed it
        assert echo.received == 0
        s.setblocking(True)
        proxy.heal()
        wait_for(lambda: echo.received >= sent, 20, "everything sent to reach the server after heal")


def test_reset_resets_open_and_new_connections_until_healed(proxy: FaultProxy, echo: EchoServer) -> None:
    with connect(proxy) as s:
        assert roundtrip(s) == b"ping"
        proxy.reset()
        with pytest.raises((ConnectionResetError, BrokenPipeError)):
            for _ in range(3):  # the RST is in; the next read (or a write after it) raises
                s.sendall(b"x")
                if not s.recv(1):
                    pytest.fail("a reset connection ended with a FIN, not an RST")
        wait_for(lambda: "reset" in echo.ends, 10, "the server side to be reset too")
        for _ in range(3):
            with pytest.raises((ConnectionResetError, BrokenPipeError)), connect(proxy) as s2:
                s2.sendall(b"x")
                s2.recv(1)
        assert proxy.refused >= 3
    proxy.heal()
    with connect(proxy) as s:
        assert roundtrip(s) == b"ping"


def test_vanish_is_silent_then_resets_what_lived_through_it(proxy: FaultProxy, echo: EchoServer) -> None:
    with connect(proxy) as s:
        assert roundtrip(s) == b"ping"
        proxy.vanish()
        s.sendall(b"lost")
        assert silent(s, 0.7), "a vanished peer sends no FIN and no RST"
        assert echo.ends == []  # nor does the server hear of it
        proxy.heal()
        s.settimeout(5)
        with pytest.raises((ConnectionResetError, BrokenPipeError)):
            s.recv(1)
            s.sendall(b"x")
            s.recv(1)
    with connect(proxy) as s:  # the peer is back: new connections work
        assert roundtrip(s) == b"ping"


def test_half_open_closes_the_server_side_only(proxy: FaultProxy, echo: EchoServer) -> None:
    with connect(proxy) as s:
        assert roundtrip(s) == b"ping"
        proxy.half_open()
        wait_for(lambda: echo.ends == ["eof"], 10, "the server to see its side closed")
        s.sendall(b"unheard")
        assert silent(s), "the client side of a half-open connection hears nothing"
        with connect(proxy) as s2:  # new connections work
            assert roundtrip(s2) == b"ping"
    proxy.heal()


def test_delay_and_bandwidth(proxy: FaultProxy) -> None:
    with connect(proxy) as s:
        assert roundtrip(s) == b"ping"
        proxy.delay(300)
        t0 = time.monotonic()
        assert roundtrip(s) == b"ping"
        took = time.monotonic() - t0
        print(f"round trip with 300 ms each way: {took:.2f} s")
        assert took >= 0.55  # two delayed hops; a slow machine only adds
        proxy.bandwidth(100_000)
        data = b"b" * 100_000
        t0 = time.monotonic()
        assert roundtrip(s, data) == data
        took = time.monotonic() - t0
        print(f"100 kB at 100 kB/s: {took:.2f} s")
        assert took >= 0.8
        proxy.heal()
        assert roundtrip(s) == b"ping"


def test_connection_limit_and_clean_close(echo: EchoServer) -> None:
    proxy = FaultProxy("127.0.0.1", echo.port, max_connections=2).start()
    threads = threading.active_count()
    a, b = connect(proxy), connect(proxy)
    assert roundtrip(a) == b"ping" and roundtrip(b) == b"ping"
    with pytest.raises((ConnectionResetError, BrokenPipeError)), connect(proxy) as c:
        c.sendall(b"x")
        c.recv(1)
    proxy.close()
    proxy.close()  # idempotent
    for s in (a, b):
        with pytest.raises(OSError):
            s.sendall(b"x")
            if not s.recv(1):
                raise ConnectionResetError
        s.close()
    wait_for(lambda: threading.active_count() <= threads - 1, 10, "the proxy's thread to end")
    with pytest.raises(OSError):
        socket.create_connection((proxy.host, proxy.port), timeout=2).close()


def test_an_unreachable_target_resets_the_client() -> None:
    from _support.ports import dead_address

    host, port = dead_address().rsplit(":", 1)
    with FaultProxy(host, int(port)) as proxy, pytest.raises((ConnectionResetError, BrokenPipeError)), \
            connect(proxy) as s:
        s.sendall(b"x")
        if not s.recv(1):
            raise AssertionError("expected a reset")


def test_bad_arguments() -> None:
    with pytest.raises(ValueError):
        FaultProxy("127.0.0.1", 0)
    with FaultProxy("127.0.0.1", 9) as p:
        with pytest.raises(ValueError):
            p.delay(-1)
        with pytest.raises(ValueError):
            p.bandwidth(0)
