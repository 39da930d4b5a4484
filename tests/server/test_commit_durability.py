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


def test_journal_replayed_over_the_files_and_emptied_by_the_save(tmp_path: Path) -> None:
    from tubemq.server.broker.offsets import JOURNAL, OffsetStore

    store = OffsetStore(tmp_path)
    store.set("g", "t", 0, 28)
    store.save()
    assert store.journal([("g", "t", 0, 56), ("g", "t", 1, 28), ("é" * 300, "t", 0, 84)]) is None
    journal = tmp_path / "offsets" / JOURNAL
    with journal.open("ab") as f:
        f.write(b'["g","t",0,9')  # a torn last line: the crash came in the middle of a write
    again = OffsetStore(tmp_path)  # a crash before the timer's save: the journal holds the commits
    assert again.partitions("g") == {("t", 0): 56, ("t", 1): 28}
    assert again.partitions("é" * 300) == {("t", 0): 84}
    again.set("g", "t", 0, 112)  # the broker's commit: set, then journaled before the answer
    assert again.journal([("g", "t", 0, 112)]) is None
    assert again.save() == frozenset() and journal.stat().st_size == 0  # every entry is in the files
    again.close()
    assert OffsetStore(tmp_path).partitions("g") == {("t", 0): 112, ("t", 1): 28}
