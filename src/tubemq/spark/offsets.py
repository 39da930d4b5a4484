"""The offsets model of the Spark source: ``{"topic": {"brokerId:partitionId": offset}}``.

TubeMQ offsets are byte positions in a broker store's index file; every message has one 28-byte
index entry. All partitions of one store share that index (the default topic layout is one store
with several partitions), so the offsets of one partition grow in multiples of 28 but jump over
the entries of its siblings. Consequences this module encodes:

* An offset range ``[start, end)`` of a partition holds at most ``(end - start) / 28`` of its
  messages -- exactly that many when the partition has its own store, fewer when siblings share it.
  ``maxOffsetsPerTrigger`` is therefore a budget of index entries: an upper bound on the rows of a
  micro-batch, never exceeded, sometimes not reached.
* A start offset must be an index-entry boundary the broker handed out (the broker clamps a
  bootstrap offset into ``[min, max]`` but does not re-align it), so user-given offsets must be
  multiples of 28; the source only ever produces ends of the form ``start + 28 * n`` or a ``max``
  the broker reported.

The flat form used internally is ``{(topic, "brokerId:partitionId"): offset}``; the nested form is
what Spark stores in the checkpoint (sorted keys, so equal offsets always serialise identically --
Spark compares offsets by their JSON text).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Literal

from ..errors import ConfigError
from ..protocol.constants import INDEX_ENTRY_SIZE

#: Bytes per index entry: the unit of TubeMQ offsets.
ENTRY_SIZE = INDEX_ENTRY_SIZE
#: Per-partition sentinels in offset JSON (Kafka's convention).
EARLIEST = -2
LATEST = -1

OffsetSpec = Literal["earliest", "latest"] | dict[str, dict[str, int]]
Flat = dict[tuple[str, str], int]


def partition_key(broker_id: int, partition_id: int) -> str:
    """``"brokerId:partitionId"``: a partition's key inside one topic of the offsets JSON."""
    return f"{int(broker_id)}:{int(partition_id)}"


def parse_partition_key(text: str) -> tuple[int, int]:
    """``"1:10002"`` -> ``(1, 10002)``; ValueError with the expected format otherwise."""
    if not isinstance(text, str):
        raise ValueError(f"partition key must be a string 'brokerId:partitionId', got {text!r}")
    b, sep, p = text.strip().partition(":")
    if not sep or not b.strip().isdigit() or not p.strip().isdigit():
        raise ValueError(f"bad partition key {text!r}; expected 'brokerId:partitionId' such as '1:0'")
    return int(b), int(p)


def parse_offsets_option(
    option: str,
    text: str | None,
    *,
    default: Literal["earliest", "latest"],
    allow_latest: bool = True,
    allow_earliest: bool = True,
) -> OffsetSpec:
    """``earliest`` | ``latest`` | JSON ``{"topic": {"1:0": 2800, "1:1": -2}}`` (-2 earliest, -1 latest)."""
    if text is None:
        return default
    value = text.strip()
    low = value.lower()
    if low in ("earliest", "latest"):
        if low == "latest" and not allow_latest:
            raise ConfigError(option, "'latest' is not allowed here (a batch query would read nothing)")
        if low == "earliest" and not allow_earliest:
            raise ConfigError(option, "'earliest' is not allowed here (a batch query would read nothing)")
        return low  # type: ignore[return-value]
    example = '{"topic": {"1:0": 2800, "1:1": -2}} (offsets are multiples of 28; -2 = earliest, -1 = latest)'
    try:
        data = json.loads(value)
    except ValueError:
        raise ConfigError(
            option, f"must be 'earliest', 'latest' or JSON like {example}; got {text!r}"
        ) from None
    if not isinstance(data, dict) or not data:
        raise ConfigError(option, f"must be a non-empty JSON object like {example}")
    out: dict[str, dict[str, int]] = {}
    for topic, parts in data.items():
        if not isinstance(parts, dict) or not parts:
            raise ConfigError(option, f"topic {topic!r} needs an object of partition offsets like {example}")
        inner: dict[str, int] = {}
        for key, off in parts.items():
            try:
                b, p = parse_partition_key(key)
            except ValueError as exc:
                raise ConfigError(option, f"topic {topic!r}: {exc}") from None
            if isinstance(off, bool) or not isinstance(off, int):
                raise ConfigError(option, f"offset of {topic}/{key} must be an integer, got {off!r}")
            if off == LATEST and not allow_latest:
                raise ConfigError(option, f"{topic}/{key}: -1 (latest) is not allowed here")
            if off == EARLIEST and not allow_earliest:
                raise ConfigError(option, f"{topic}/{key}: -2 (earliest) is not allowed here")
            if off < EARLIEST or (off >= 0 and off % ENTRY_SIZE):
                raise ConfigError(
                    option,
                    f"offset {off} of {topic}/{key} is not an index-entry boundary: TubeMQ offsets are "
                    f"multiples of {ENTRY_SIZE} (or -2 earliest, -1 latest)",
                )
            inner[partition_key(b, p)] = off
        out[str(topic)] = dict(sorted(inner.items()))
    return dict(sorted(out.items()))


def flatten(nested: Mapping[str, Mapping[str, int]]) -> Flat:
    """Nested checkpoint form -> flat; validates what Spark hands back (``ValueError`` if malformed)."""
    if not isinstance(nested, Mapping):
        raise ValueError(f"TubeMQ offsets must be a JSON object, got {nested!r}")
    flat: Flat = {}
    for topic, parts in nested.items():
        if not isinstance(parts, Mapping):
            raise ValueError(f"TubeMQ offsets of topic {topic!r} must be an object, got {parts!r}")
        for key, off in parts.items():
            b, p = parse_partition_key(key)
            if isinstance(off, bool) or not isinstance(off, int) or off < 0:
                raise ValueError(f"TubeMQ offset of {topic}/{key} must be an integer >= 0, got {off!r}")
            flat[(str(topic), partition_key(b, p))] = off
    return flat


def nest(flat: Mapping[tuple[str, str], int]) -> dict[str, dict[str, int]]:
    """Flat -> nested with sorted topics and partitions (numerically), for stable JSON."""
    out: dict[str, dict[str, int]] = {}
    for topic, key in sorted(flat, key=lambda tk: (tk[0], parse_partition_key(tk[1]))):
        out.setdefault(topic, {})[key] = int(flat[(topic, key)])
    return out


def to_json(flat: Mapping[tuple[str, str], int]) -> str:
    """The checkpoint JSON text of ``flat``."""
    return json.dumps(nest(flat), sort_keys=False, separators=(",", ":"))


def rate_limit(
    start: Mapping[tuple[str, str], int], latest: Mapping[tuple[str, str], int], max_entries: int
) -> Flat:
    """End offsets that advance every partition from ``start`` toward ``latest`` by at most
    ``max_entries`` index entries in total.

    The budget is shared in proportion to each partition's backlog (like Kafka's
    ``maxOffsetsPerTrigger``), rounding down and handing the remainder out one entry at a time to
    the largest fractional shares (ties broken by partition order), so the total never exceeds the
    budget, every call with a backlog advances by at least one entry, and equal inputs give equal
    outputs (a restarted query re-plans the same batch). Partitions whose latest is not above
    their start keep their start.
    """
    if max_entries <= 0:
        raise ValueError("max_entries must be > 0")
    end: Flat = dict(start)
    lag: dict[tuple[str, str], int] = {}
    for tp, hi in latest.items():
        lo = start.get(tp)
        if lo is None:
            raise ValueError(f"no start offset for {tp}")
        if hi > lo:
            lag[tp] = (hi - lo) // ENTRY_SIZE
        end.setdefault(tp, lo)
    total = sum(lag.values())
    if total <= max_entries:
        for tp in lag:
            end[tp] = latest[tp]
        return end
    order = sorted(lag, key=lambda tk: (tk[0], parse_partition_key(tk[1])))
    quota: dict[tuple[str, str], int] = {}
    remainders: list[tuple[int, int, tuple[str, str]]] = []
    for i, tp in enumerate(order):
        share, rem = divmod(max_entries * lag[tp], total)
        quota[tp] = share
        remainders.append((-rem, i, tp))
    left = max_entries - sum(quota.values())
    for _, _, tp in sorted(remainders):
        if left <= 0:
            break
        if quota[tp] < lag[tp]:
            quota[tp] += 1
            left -= 1
    for tp in order:
        end[tp] = start[tp] + quota[tp] * ENTRY_SIZE if quota[tp] < lag[tp] else latest[tp]
    return end
