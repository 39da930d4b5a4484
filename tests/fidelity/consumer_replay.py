"""Fake master + broker for consumer captures: the REAL servers' answers, scripted like the real servers.

The master side hands out the recorded heartbeat answers the way a real master does: an event is
delivered once, and the next event only after the client reported the previous one (status 2 with
its rebalanceId, §5.4). The broker side answers per partition: the n-th getMessage on a partition gets
the real answer to the Java client's n-th getMessage on it (the last answer repeats), and a commit gets
the real answer to the commit that followed that getMessage in the capture.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tubemq.protocol.constants import MSG_OPTYPE_REGISTER, MSG_OPTYPE_UNREGISTER, Method

from .replay import CapFrame, Capture, ReplayServer, Seen, Sequence, answer, decode_answer


@dataclass
class ConsumerReplay:
    """Scripts for one Java consumer of a capture (its master and broker connection ids)."""

    cap: Capture
    master_conn: int
    broker_conn: int
    subs: dict[str, str] = field(default_factory=dict)
    #: our heartbeats that carried an event report, and the events we delivered (as sent)
    reports: list[Seen] = field(default_factory=list)
    delivered: list[Any] = field(default_factory=list)
    delivered_at: list[float] = field(default_factory=list)
    hold_events: bool = False

    def __post_init__(self) -> None:
        cap, mc, bc = self.cap, self.master_conn, self.broker_conn
        self.java_id = cap.requests(Method.MASTER_CONSUMER_REGISTER, conn=mc)[0].message["clientId"]
        self.group = cap.requests(Method.MASTER_CONSUMER_REGISTER, conn=mc)[0].message["groupName"]
        beats = cap.requests(Method.MASTER_CONSUMER_HEARTBEAT, conn=mc)
        answers = [cap.answer_to(r) for r in beats]
        self.events = [a for a in answers if decode_answer(a).HasField("event")]
        quiet = [a for a in answers if not decode_answer(a).HasField("event")]
        self.quiet_before = quiet[0]
        # after the i-th event: the real answer to the Java client's report of it (tokens stay current)
        self.quiet_after = []
        for ev in self.events:
            rid = decode_answer(ev).event.rebalanceId
            rep = [r for r in beats if r.message.get("event", {}).get("rebalanceId") == rid and r.t_ms > ev.t_ms]
            self.quiet_after.append(cap.answer_to(rep[0]) if rep else quiet[-1])
        self._next_event = 0
        self._waiting: int | None = None
        self.register = cap.answers(Method.MASTER_CONSUMER_REGISTER, conn=mc)[0]
        self.close = cap.answers(Method.MASTER_CONSUMER_CLOSE, conn=mc)[0]
        # broker side, per partition id
        self.reg: dict[int, CapFrame] = {}
        self.unreg: dict[int, CapFrame] = {}
        for r in cap.requests(Method.BROKER_CONSUMER_REGISTER, conn=bc):
            target = self.reg if r.message["opType"] == MSG_OPTYPE_REGISTER else self.unreg
            target.setdefault(r.message["partitionId"], cap.answer_to(r))
        self.fetches: dict[int, Sequence] = {}
        self.commit_after: dict[int, list[CapFrame | None]] = {}
        last_fetch: dict[int, int] = {}
        per_part: dict[int, list[CapFrame]] = {}
        commits: dict[int, list[CapFrame | None]] = {}
        for f in cap.frames:
            if f.direction != "c2b" or f.conn_id != bc:
                continue
            if f.method == Method.BROKER_CONSUMER_GET_MESSAGE:
                pid = f.message["partitionId"]
                per_part.setdefault(pid, []).append(cap.answer_to(f))
                commits.setdefault(pid, []).append(None)
                last_fetch[pid] = len(per_part[pid]) - 1
            elif f.method == Method.BROKER_CONSUMER_COMMIT:
                pid = f.message["partitionId"]
                commits[pid][last_fetch[pid]] = cap.answer_to(f)
        self.fetches = {pid: Sequence(frames) for pid, frames in per_part.items()}
        self.commit_after = commits
        self._last_given: dict[int, int] = {}
        hb = cap.answers(Method.BROKER_CONSUMER_HEARTBEAT, conn=bc)
        self.broker_heartbeat = hb[0] if hb else None

    def bind(self, our_id: str, broker: ReplayServer) -> None:
        """Point the real answers at our run: our client id, the fake broker's port."""
        self.subs = {self.java_id: our_id, "127.0.0.1:8123": f"127.0.0.1:{broker.port}"}

    # ---------------------------------------------------------------- master
    def master(self, s: Seen) -> bytes | None:
        if s.method == Method.MASTER_CONSUMER_REGISTER:
            return answer(self.register, s.serial, self.subs)
        if s.method == Method.MASTER_CONSUMER_CLOSE:
            return answer(self.close, s.serial, self.subs)
        if s.method != Method.MASTER_CONSUMER_HEARTBEAT:
            return None
        msg = s.msg
        if msg.HasField("event") and msg.event.rebalanceId > 0:
            self.reports.append(s)
            if msg.event.rebalanceId == self._waiting:
                self._waiting = None
        if self._waiting is None and not self.hold_events and self._next_event < len(self.events):
            frame = self.events[self._next_event]
            self._next_event += 1
            out = answer(frame, s.serial, self.subs)
            ev = decode_answer(frame).event
            self._waiting = ev.rebalanceId
            self.delivered.append(_event_as_sent(ev, self.subs))
            self.delivered_at.append(s.t)
            return out
        quiet = self.quiet_after[self._next_event - 1] if self._next_event else self.quiet_before
        return answer(quiet, s.serial, self.subs)

    @property
    def all_events_reported(self) -> bool:
        return self._next_event == len(self.events) and self._waiting is None

    # ---------------------------------------------------------------- broker
    def broker(self, s: Seen) -> bytes | None:
        m = s.msg
        if s.method == Method.BROKER_CONSUMER_REGISTER:
            table = self.reg if m.opType == MSG_OPTYPE_REGISTER else self.unreg
            if m.opType == MSG_OPTYPE_UNREGISTER and m.partitionId not in table:
                table = self.unreg or self.reg
            frame = table.get(m.partitionId) or next(iter(table.values()))
            return answer(frame, s.serial, self.subs)
        if s.method == Method.BROKER_CONSUMER_GET_MESSAGE:
            seq = self.fetches.get(m.partitionId)
            if seq is None:  # Java never read this partition: the real "no data" answer of the run
                none = [f for q in self.fetches.values() for f in q.frames if f.message.get("errCode") == 404]
                seq = self.fetches[m.partitionId] = Sequence(none[:1])
                self.commit_after[m.partitionId] = [None]
            self._last_given[m.partitionId] = min(seq.used, len(seq.frames) - 1)
            return answer(seq.next(), s.serial, self.subs)
        if s.method == Method.BROKER_CONSUMER_COMMIT:
            idx = self._last_given.get(m.partitionId, 0)
            options = self.commit_after[m.partitionId]
            # Java committed after that answer: its real reply; else the nearest earlier (then later) one
            candidates = [f for f in reversed(options[: idx + 1]) if f] + [f for f in options[idx + 1:] if f]
            if not candidates:
                return None
            frame = candidates[0]
            return answer(frame, s.serial, self.subs)
        if s.method == Method.BROKER_CONSUMER_HEARTBEAT and self.broker_heartbeat is not None:
            return answer(self.broker_heartbeat, s.serial, self.subs)
        return None

    def fetched_all(self) -> bool:
        """Every partition got at least as many getMessage answers as the Java client did."""
        return all(seq.used >= len(seq.frames) for seq in self.fetches.values())


@dataclass
class Fault:
    """A switch for :func:`inject`: while ``on``, the picked requests get the fault's answer."""

    on: bool = False


def inject(rp: ConsumerReplay, side: str, hit: Callable[[Seen], bool], reply: Callable[[Seen], bytes | None], *,
           off_at: Callable[[Seen], bool] | None = None) -> Fault:
    """Wrap ``rp``'s ``side`` script ("master" or "broker"): while the returned fault is on, the requests
    ``hit`` picks get ``reply(seen)`` (a real error answer) instead of the script's; a request ``off_at``
    picks switches it off again (and gets the script's answer)."""
    fault = Fault()
    script: Callable[[Seen], bytes | None] = getattr(rp, side)

    def serve(s: Seen) -> bytes | None:
        if fault.on and hit(s):
            return reply(s)
        if off_at is not None and off_at(s):
            fault.on = False
        return script(s)

    setattr(rp, side, serve)
    return fault


def _event_as_sent(ev: Any, subs: Mapping[str, str]) -> dict[str, Any]:
    infos = []
    for s in ev.subscribeInfo:
        for old, new in subs.items():
            s = s.replace(old, new)
        infos.append(s)
    return {"rebalanceId": ev.rebalanceId, "opType": ev.opType, "subscribeInfo": infos}
