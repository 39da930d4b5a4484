"""``confirm()`` returning True survives a broker crash: the broker saves a commit's offset (to the OS,
or the disk with ``--flush always``) before it acknowledges the commit, so a group restarted after a
SIGKILL that came right after the confirm does not receive the confirmed messages again."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

import tubemq
from tubemq.server.meta import MetaStore

from ._child import ServerChild

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")

COUNT = 30


@pytest.mark.parametrize("flush", ["interval", "always"])
def test_confirmed_commit_survives_sigkill(tmp_path: Path, flush: str) -> None:
    d = tmp_path / "d"
    MetaStore(d).create_topic("dur", partitions=1)
    server = ServerChild(d, "--flush", flush)
    try:
        with tubemq.Producer(server.master) as p:
            for i in range(COUNT):
                p.send("dur", b"m-%03d" % i)
        confirmed: list[bytes] = []
        c = tubemq.Consumer(server.master, group="g-dur", topics=["dur"], consume_from="earliest")
        try:
            deadline = time.monotonic() + 30
            while len(confirmed) < COUNT and time.monotonic() < deadline:
                b = c.poll(timeout=0.5)
                if b is not None and c.confirm(b):  # True: the broker acknowledged the commit
                    confirmed += [bytes(m.data) for m in b]
            server.kill()  # at once: no periodic offset save can have run since the last confirm
        finally:
            c.close()
    finally:
        server.kill()
    assert len(confirmed) == COUNT
    again = ServerChild(d, "--flush", flush)
    try:
        redelivered: list[bytes] = []
        with tubemq.Producer(again.master) as p:
            p.send("dur", b"after")
        with tubemq.Consumer(again.master, group="g-dur", topics=["dur"], consume_from="earliest") as c2:
            deadline = time.monotonic() + 30
            while b"after" not in redelivered and time.monotonic() < deadline:
                b = c2.poll(timeout=0.5)
                if b is not None:
                    redelivered += [bytes(m.data) for m in b]
                    c2.confirm(b)
    finally:
        again.kill()
    twice = sorted(set(redelivered) & set(confirmed))
    print(f"flush={flush}: {len(confirmed)} confirmed before SIGKILL, {len(twice)} delivered again")
    assert b"after" in redelivered
    assert not twice, f"{len(twice)} messages delivered again although confirm() returned True: {twice[:3]}"
