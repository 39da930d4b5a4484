"""The active master's fence (server/fence.py): a gap in its own timer holds client calls until a
replication round started after the wake has asked the peer."""

from __future__ import annotations

from tubemq.server.fence import Fence


def test_a_freeze_holds_until_a_later_round_releases() -> None:
    now = [100.0]
    woken: list[bool] = []
    f = Fence(1.0, lambda: woken.append(True), clock=lambda: now[0])
    for _ in range(5):  # a loop running on time is never held
        now[0] += 0.1
        f.tick()
        assert not f.blocked()
    round_before_freeze = now[0]
    now[0] += 30.0  # frozen: requests read before the timer runs are held by the gap alone
    assert f.blocked() and not woken
    f.tick()
    assert f.blocked() and woken == [True]
    f.release(round_before_freeze)  # a round that started before the freeze proves nothing
    assert f.blocked()
    now[0] += 0.2
    f.release(now[0])
    assert not f.blocked()
    now[0] += 0.1
    f.tick()
    assert not f.blocked() and woken == [True]
