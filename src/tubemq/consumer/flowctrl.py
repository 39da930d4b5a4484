"""Consumer-side flow control (docs/PROTOCOL.md §5.2.8): the master's rule sets and the fetch pacing they imply.

The master sends two rule sets (cluster default and group), each identified by an id; −2 and ``" "``
mean "no rules". A rule set is JSON: ``[{"type": t, "rule": [...]}, ...]`` with
type 0 = data limit (lag-dependent pacing inside a GMT+8 time window), type 1 = pacing after
consecutive empty fetches, type 3 = filter-consumer pacing. The group set wins over the default set
per type. Without rules the consumer uses its configured waits (Java defaults).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("tubemq.consumer.flowctrl")

UNDEFINED_ID = -2
_MB = 1024 * 1024
_GMT8 = 8 * 3600


@dataclass(frozen=True)
class DataLimitRule:
    start_min: int  # minutes since midnight, GMT+8
    end_min: int
    dlt_bytes: int
    limit_bytes_per_min: int
    freq_ms: int

    def active(self, minute_of_day: int, data_dlt: int) -> bool:
        return self.start_min <= minute_of_day <= self.end_min and data_dlt >= self.dlt_bytes


@dataclass(frozen=True)
class RuleSet:
    data_limits: tuple[DataLimitRule, ...] = ()
    #: (zeroCnt, freqInMs), sorted by zeroCnt
    empty_rules: tuple[tuple[int, int], ...] = ()
    #: (normFreqInMs, filterFreqInMs, minDataFilterFreqInMs)
    filter_rule: tuple[int, int, int] | None = None


def _hhmm(text: str) -> int:
    h, m = text.strip().split(":")
    hh, mm = int(h), int(m)
    if not (0 <= hh <= 23 and 0 <= mm <= 59):
        raise ValueError(f"bad time {text!r}")
    return hh * 60 + mm


def parse_rules(text: str | None) -> RuleSet:
    """Parse a flow-control JSON rule set; malformed items are skipped with a warning."""
    if text is None or not text.strip():
        return RuleSet()
    try:
        doc = json.loads(text)
    except ValueError as exc:
        log.warning("ignoring unparsable flow-control rules: %s", exc)
        return RuleSet()
    if not isinstance(doc, list):
        log.warning("ignoring flow-control rules that are not a JSON array")
        return RuleSet()
    limits: list[DataLimitRule] = []
    empties: list[tuple[int, int]] = []
    filt: tuple[int, int, int] | None = None
    for entry in doc:
        try:
            kind = int(entry["type"])
            items: list[dict[str, Any]] = list(entry.get("rule") or [])
            for it in items:
                if kind == 0:
                    limits.append(DataLimitRule(
                        _hhmm(it["start"]), _hhmm(it["end"]), int(it["dltInM"]) * _MB,
                        int(it["limitInM"]) * _MB, max(0, int(it["freqInMs"]))))
                elif kind == 1:
                    empties.append((max(1, int(it["zeroCnt"])), max(0, int(it["freqInMs"]))))
                elif kind == 3:
                    filt = (max(0, int(it.get("normFreqInMs", 0))), max(0, int(it.get("filterFreqInMs", 0))),
                            max(0, int(it.get("minDataFilterFreqInMs", 0))))
        except (KeyError, TypeError, ValueError) as exc:
            log.warning("skipping malformed flow-control rule %r: %s", entry, exc)
    return RuleSet(tuple(limits), tuple(sorted(empties)), filt)


@dataclass
class FlowControl:
    """Current rule ids and sets; ``fetch_delay`` turns a fetch outcome into a wait in seconds."""

    msg_not_found_wait_ms: int = 400
    filter_wait_ms: int = 100
    def_id: int = UNDEFINED_ID
    group_id: int = UNDEFINED_ID
    qry_priority_id: int = UNDEFINED_ID
    _default: RuleSet = field(default_factory=RuleSet)
    _group: RuleSet = field(default_factory=RuleSet)
    #: bytes fetched in the current minute (data-limit accounting)
    _minute: int = -1
    _minute_bytes: int = 0

    def update(self, msg: Any) -> None:
        """Apply the flow fields of a RegisterResponseM2C / HeartResponseM2C (ids ≥ 0 that changed)."""
        if msg.HasField("defFlowCheckId"):
            new = int(msg.defFlowCheckId)
            if new != self.def_id:
                self._default = parse_rules(msg.defFlowControlInfo) if new >= 0 else RuleSet()
                self.def_id = new
        if msg.HasField("groupFlowCheckId"):
            new = int(msg.groupFlowCheckId)
            if new != self.group_id:
                self._group = parse_rules(msg.groupFlowControlInfo) if new >= 0 else RuleSet()
                self.group_id = new
        if msg.HasField("qryPriorityId"):
            self.qry_priority_id = int(msg.qryPriorityId)

    def _pick(self, attr: str) -> Any:
        g = getattr(self._group, attr)
        return g if g else getattr(self._default, attr)

    @property
    def has_data_limits(self) -> bool:
        return bool(self._group.data_limits or self._default.data_limits)

    def empty_delay(self, empty_count: int) -> float:
        """Wait after ``empty_count`` consecutive "no data" answers (type-1 rules, else the 404 wait)."""
        rules: tuple[tuple[int, int], ...] = self._pick("empty_rules")
        wait = None
        for zero_cnt, freq in rules:
            if empty_count >= zero_cnt:
                wait = freq
        return (self.msg_not_found_wait_ms if wait is None else wait) / 1000.0

    def data_delay(self, *, filtered: bool, require_slow: bool, data_dlt: int, nbytes: int) -> float:
        """Wait after a successful fetch: data-limit (type 0) and filter (type 3) pacing."""
        delay_ms = 0
        filt = self._pick("filter_rule")
        if filt is not None:
            norm, flt, min_data = filt
            delay_ms = (min_data if require_slow else flt) if filtered else norm
        elif filtered and require_slow and nbytes == 0:
            delay_ms = self.filter_wait_ms
        limits: tuple[DataLimitRule, ...] = self._pick("data_limits")
        if limits and data_dlt >= 0:
            now = time.time() + _GMT8
            minute = int(now // 60)
            if minute != self._minute:
                self._minute, self._minute_bytes = minute, 0
            self._minute_bytes += nbytes
            minute_of_day = minute % (24 * 60)
            for rule in limits:
                if rule.active(minute_of_day, data_dlt) and self._minute_bytes > rule.limit_bytes_per_min:
                    delay_ms = max(delay_ms, rule.freq_ms)
                    break
        return delay_ms / 1000.0


__all__ = ["DataLimitRule", "FlowControl", "RuleSet", "parse_rules"]
