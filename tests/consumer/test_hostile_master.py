"""A master that accepts and never answers (or stalls mid-frame): every client constructor fails with a
typed TubeMQError naming the peer and the operation (issue 11 item 1: it was a TypeError on 3.11+)."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import tubemq
from tubemq.errors import TubeMQError, TubeMQTimeoutError
from tubemq.protocol.constants import BEGIN_TOKEN

#: the fastest timers the config allows, so each client gives up after 5 x 3 s
FAST = {"rpc_timeout_ms": 3000, "register_retry_wait_ms": 10, "connect_timeout_ms": 1000}


class FakeMaster:
    """A TCP server on 127.0.0.1 that reads requests and answers nothing, or half a frame."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.address = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self._stop = threading.Event()
        self._conns: list[socket.socket] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self._conns.append(conn)
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        conn.settimeout(0.2)
        sent = False
        while not self._stop.is_set():
            try:
                if not conn.recv(65536):
                    return
            except TimeoutError:
                continue
            except OSError:
                return
            if self.mode == "half" and not sent:
                # begin token + serial of a frame that announces one block and never sends it
                conn.sendall(struct.pack(">IiI", BEGIN_TOKEN, 1, 1))
                sent = True

    def close(self) -> None:
        self._stop.set()
        self.sock.close()
        for c in self._conns:
            c.close()
        self._thread.join(5)


@pytest.fixture(params=["silent", "half"])
def fake_master(request: Any) -> Iterator[FakeMaster]:
    m = FakeMaster(request.param)
    try:
        yield m
    finally:
        m.close()


def _clients(address: str) -> dict[str, Callable[[], Any]]:
    return {
        "producer": lambda: tubemq.Producer(address, **FAST),
        "consumer": lambda: tubemq.Consumer(address, group="g", topics=["t"], **FAST),
        "bound consumer": lambda: tubemq.BoundConsumer(address, group="g", topics=["t"], **FAST),
    }


def test_constructors_against_a_silent_master_raise_typed_errors(fake_master: FakeMaster) -> None:
    outcomes: dict[str, BaseException | None] = {}

    def attempt(name: str, build: Callable[[], Any]) -> None:
        try:
            client = build()
        except BaseException as exc:  # noqa: BLE001 - recorded and checked below
            outcomes[name] = exc
        else:
            client.close()
            outcomes[name] = None

    threads = [threading.Thread(target=attempt, args=item) for item in _clients(fake_master.address).items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert set(outcomes) == {"producer", "consumer", "bound consumer"}
    for name, exc in outcomes.items():
        assert isinstance(exc, TubeMQError), f"{name}: {exc!r}"  # was TypeError ({timeout:g} with None)
        assert isinstance(exc, TubeMQTimeoutError), f"{name}: {exc!r}"
        text = str(exc)
        assert fake_master.address in text and f"{name} start (register with master" in text, text
