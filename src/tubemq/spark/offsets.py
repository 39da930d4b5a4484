"""The offsets model of the Spark source: ``{"topic": {"brokerId:partitionId": offset}}``.

TubeMQ offsets are byte positions in a broker store's index file; every message has one 28-byte
index entry. All partitions of one store share that index (TubeMQ's default topic layout is one
store holding several partitions), so one partition's offsets grow in multiples of 28 but jump
over its siblings' entries. The source works with these positions directly; what follows is how
ranges, the read limit and the delivery guarantees fit them.

Ranges. A Spark task reads ``[start, end)`` of one partition: the messages whose index entry lies
at or after ``start`` and before ``end``. Range ends always come from the broker (its max offset,
a checkpointed end) or from ``start + 28 * n``, so they are entry boundaries; the broker clamps a
bootstrap offset into ``[min, max]`` but does not re-align it, hence user-given offsets must be
multiples of 28. Reading is exact even in a shared store: a fetch returns the partition's messages
without their individual positions, so ``BoundConsumer.read_range`` cuts the fetch that crosses
``end`` at the first message stored at or after ``end`` (found by probing the partition at ``end``,
matched by message id). Consecutive ranges ``[a, b)``, ``[b, c)`` therefore neither lose nor
repeat a message, and a retried task returns the same rows.

``maxOffsetsPerTrigger``. Messages per micro-batch, as Kafka counts them (:func:`rate_limit`).
Offsets are 28-byte index positions, so the planner converts: a partition alone in its store holds
one message per entry; the partitions of a shared store (ids ``store * 10000 + local``) hold one
entry each per message between them, so they are planned together, moved to a common end offset,
with the store's share of the budget counted in entries of that store's index. A micro-batch then
has exactly the budget's rows when enough data is waiting and the store's partitions stand at one
position (they do after their first micro-batch, and from ``earliest`` or ``latest``); never more.
Fewer when only some of a store's partitions are read, or stream-id filters drop rows. Every call
with a backlog advances at least one entry, so a query always makes progress.

The ``offset`` column. Inside a fetch the consumer numbers messages ``fetch start + 28 * i``: the
exact index offset for a partition alone in its store, a lower bound of it in a shared store
(strictly increasing per partition either way). Use it to order rows, not as a resume position: a
``startingOffsets`` taken from it in a shared store starts at or before the message, so a query
started there re-reads some earlier messages but never skips one (at-least-once). Checkpointed
offsets are exact broker positions, so a restarted streaming query reads exactly the data after
its last batch.

Delivery. Reads are exactly the planned ranges (a mid-range reconnect resumes from an under-
estimate and drops already returned messages by id). Writes are at-least-once (a retried task
sends its rows again); ``stampAttributes`` lets readers deduplicate. ``(partition, message_id)``
identifies a stored message.

The flat form used internally is ``{(topic, "brokerId:partitionId"): offset}``; the nested form is
what Spark stores in the checkpoint (sorted keys, so equal offsets always serialise identically --
Spark compares offsets by their JSON text).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Literal

from ..errors import ConfigError
from ..protocol.constants import INDEX_ENTRY_SIZE, META_STORE_INS_BASE

#: Bytes per index entry: the unit of TubeMQ offsets.
ENTRY_SIZE = INDEX_ENTRY_SIZE
#: Per-partition sentinels in offset JSON (Kafka's convention).
EARLIEST = -2
LATEST = -1

OffsetSpec = Literal["earliest", "latest"] | dict[str, dict[str, int]]
Flat = dict[tuple[str, str], int]
#: epoch ms for every partition, or {topic: {"brokerId:partitionId" | "*:partitionId": epoch ms}}
TimestampSpec = int | dict[str, dict[str, int]]


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


def parse_timestamps_option(per_partition: str, text: str | None, topics: tuple[str, ...]) -> TimestampSpec | None:
    """``startingOffsetsByTimestamp`` / ``endingOffsetsByTimestamp`` JSON ``{"topic": {"0": ms, "1:10000": ms}}``
    (a bare partition id = that partition on any broker) -> ``{"topic": {"*:0": ms, "1:10000": ms}}``."""
    if text is None:
        return None
    example = '{"topic": {"0": 1700000000000, "1:1": 1700000000000}} (epoch milliseconds)'
    try:
        data = json.loads(text)
    except ValueError:
        raise ConfigError(per_partition, f"is not valid JSON; expected {example}") from None
    if not isinstance(data, dict) or not data:
        raise ConfigError(per_partition, f"must be a non-empty JSON object like {example}")
    out: dict[str, dict[str, int]] = {}
    for topic, parts in sorted(data.items()):
        if topic not in topics:
            raise ConfigError(per_partition, f"names topic {topic!r}, which is not read (topics: {', '.join(topics)})")
        if not isinstance(parts, dict) or not parts:
            raise ConfigError(per_partition, f"topic {topic!r} needs an object of partition timestamps like {example}")
        inner: dict[str, int] = {}
        for key, ts in parts.items():
            key = str(key).strip()
            if key.isdigit():
                norm = f"*:{int(key)}"
            else:
                try:
                    b, p = parse_partition_key(key)
                except ValueError as exc:
                    raise ConfigError(per_partition, f"topic {topic!r}: {exc}") from None
                norm = f"{b}:{p}"
            if isinstance(ts, bool) or not isinstance(ts, int) or ts < 0:
                raise ConfigError(per_partition, f"timestamp of {topic}/{key} must be epoch milliseconds >= 0, got {ts!r}")
            inner[norm] = ts
        out[topic] = dict(sorted(inner.items()))
    return out


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


def store_of(tp: tuple[str, str]) -> tuple[str, int, int]:
    """(topic, broker id, store id) of a partition: a broker numbers a topic's partitions
    ``store * META_STORE_INS_BASE + local``, and the partitions of one store share its index."""
    broker_id, pid = parse_partition_key(tp[1])
    return tp[0], broker_id, pid // META_STORE_INS_BASE


def rate_limit(
    start: Mapping[tuple[str, str], int], latest: Mapping[tuple[str, str], int], max_messages: int
) -> Flat:
    """End offsets that advance the partitions from ``start`` toward ``latest`` by at most
    ``max_messages`` messages in total (Kafka's ``maxOffsetsPerTrigger``).

    Planned per store, since a store's partitions share one index: every index entry is one message
    of one of them, so moving every sibling to a common end ``E`` reads exactly the entries in
    ``[s, E)`` when they stand at the same ``s`` (after their first micro-batch, or from
    ``earliest``/``latest``), and at most those of ``[min s, E)`` otherwise. A store's backlog is
    the entries from its lowest start with a backlog to its highest latest. The budget is shared in
    proportion to the stores' backlogs, rounding down and handing the remainder out one entry at a
    time to the largest fractional shares (ties broken by store order), so the total never exceeds
    the budget, every call with a backlog advances at least one entry, and equal inputs give equal
    outputs (a restarted query re-plans the same batch). Partitions whose latest is not above their
    start keep their start. A partition alone in its store is the one-sibling case: exactly the
    budget's messages when enough are waiting.
    """
    if max_messages <= 0:
        raise ValueError("max_messages must be > 0")
    end: Flat = dict(start)
    stores: dict[tuple[str, int, int], list[tuple[str, str]]] = {}
    for tp, hi in latest.items():
        lo = start.get(tp)
        if lo is None:
            raise ValueError(f"no start offset for {tp}")
        end.setdefault(tp, lo)
        if hi > lo:
            stores.setdefault(store_of(tp), []).append(tp)
    base: dict[tuple[str, int, int], int] = {}
    lag: dict[tuple[str, int, int], int] = {}
    for key, members in stores.items():
        base[key] = lo = min(start[tp] for tp in members)
        lag[key] = (max(latest[tp] for tp in members) - lo) // ENTRY_SIZE
    total = sum(lag.values())
    order = sorted(stores)
    quota: dict[tuple[str, int, int], int] = dict(lag)
    if total > max_messages:
        remainders: list[tuple[int, int, tuple[str, int, int]]] = []
        for i, key in enumerate(order):
            share, rem = divmod(max_messages * lag[key], total)
            quota[key] = share
            remainders.append((-rem, i, key))
        left = max_messages - sum(quota.values())
        for _, _, key in sorted(remainders):
            if left <= 0:
                break
            if quota[key] < lag[key]:
                quota[key] += 1
                left -= 1
    for key in order:
        stop = base[key] + quota[key] * ENTRY_SIZE
        for tp in stores[key]:
            end[tp] = latest[tp] if quota[key] >= lag[key] else max(start[tp], min(stop, latest[tp]))
    return end
