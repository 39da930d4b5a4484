"""Typed readers and checks for ``format("tubemq")`` option values: each error names the option."""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from collections.abc import Mapping
from typing import Any

from .._options import closest
from ..errors import ConfigError
from .offsets import OffsetSpec, parse_partition_key
from .option_names import (
    ASSIGN,
    CLIENT_PREFIX,
    KAFKA_UNSUPPORTED,
    MASTER,
    MSG_TIME_ZONE,
    READ_OPTIONS,
    STREAM_IDS,
    VALUE_FORMAT,
    VALUE_FORMATS,
    WRITE_OPTIONS,
)

log = logging.getLogger("tubemq.spark.options")

#: Options Spark or users commonly pass to every source/sink; never warned about.
_SPARK_GENERIC = {"path", "paths", "checkpointlocation", "queryname", "__tubemq_test__"}

_TOPIC_RE = re.compile(r"^[A-Za-z][\w-]{0,63}$")
_GROUP_RE = re.compile(r"^[A-Za-z][\w-]{0,1023}$")
_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


# ---- small typed readers over the lower-cased map


class _Opts:
    """Lower-cased view of the user's options with typed getters that name the option on error."""

    def __init__(self, options: Mapping[str, Any]) -> None:
        self.raw: dict[str, str] = {}
        for key, value in dict(options).items():
            if not isinstance(key, str):
                raise ConfigError(str(key), "option names must be strings")
            self.raw[key.lower()] = "" if value is None else str(value)

    def has(self, name: str) -> bool:
        return name.lower() in self.raw

    def get(self, name: str) -> str | None:
        return self.raw.get(name.lower())

    def string(self, name: str, default: str | None = None) -> str | None:
        value = self.get(name)
        if value is None:
            return default
        value = value.strip()
        if not value:
            raise ConfigError(name, "must not be empty")
        return value

    def boolean(self, name: str, default: bool) -> bool:
        value = self.get(name)
        if value is None:
            return default
        low = value.strip().lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
        raise ConfigError(name, f"must be 'true' or 'false', got {value!r}")

    def integer(self, name: str, default: int | None, lo: int, hi: int) -> int | None:
        value = self.get(name)
        if value is None:
            return default
        try:
            number = int(value.strip())
        except ValueError:
            raise ConfigError(name, f"must be an integer, got {value!r}") from None
        if not lo <= number <= hi:
            raise ConfigError(name, f"must be in [{lo}, {hi}], got {number}")
        return number


# ---- parsed option sets


# ---- helpers


def _master(o: _Opts) -> str:
    value = o.get(MASTER)
    if value is None or not value.strip():
        raise ConfigError(MASTER, "is required: the TubeMQ master address list, e.g. 'host1:8715,host2:8715'")
    value = value.strip()
    if "://" not in value:
        for item in value.split(","):
            host, sep, port = item.strip().rpartition(":")
            if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ConfigError(MASTER, f"expected 'host:port[,host:port...]', got {value!r}")
    return value


def _check_topic(topic: str, option: str) -> None:
    if not _TOPIC_RE.match(topic):
        raise ConfigError(
            option, f"invalid topic name {topic!r}: a letter first, then up to 63 letters, digits, '_' or '-'"
        )


def _topic_list(text: str, option: str) -> list[str]:
    topics = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        _check_topic(item, option)
        if item not in topics:
            topics.append(item)
    if not topics:
        raise ConfigError(option, "must name at least one topic (comma-separated)")
    return topics


def _parse_assign(text: str) -> dict[str, tuple[str, ...]]:
    example = '{"topic-a": ["1:0", "1:1"], "topic-b": [0]} ("brokerId:partitionId", or a bare partitionId on any broker)'
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigError(ASSIGN, f"is not valid JSON ({exc}); expected {example}") from None
    if not isinstance(data, dict) or not data:
        raise ConfigError(ASSIGN, f"must be a non-empty JSON object; expected {example}")
    out: dict[str, tuple[str, ...]] = {}
    for topic in sorted(data):
        _check_topic(topic, ASSIGN)
        parts = data[topic]
        if not isinstance(parts, list) or not parts:
            raise ConfigError(
                ASSIGN, f"topic {topic!r} needs a non-empty list of partitions; expected {example}"
            )
        keys: list[str] = []
        for p in parts:
            if isinstance(p, bool):
                raise ConfigError(ASSIGN, f"bad partition {p!r} for topic {topic!r}")
            if isinstance(p, int):
                if p < 0:
                    raise ConfigError(ASSIGN, f"bad partition id {p} for topic {topic!r}")
                key = f"*:{p}"  # any broker
            elif isinstance(p, str):
                try:
                    b, pid = parse_partition_key(p)
                except ValueError as exc:
                    raise ConfigError(ASSIGN, f"topic {topic!r}: {exc}") from None
                key = f"{b}:{pid}"
            else:
                raise ConfigError(ASSIGN, f"bad partition {p!r} for topic {topic!r}; expected {example}")
            if key not in keys:
                keys.append(key)
        out[topic] = tuple(sorted(keys))
    return out


def assign_matches(
    assign: Mapping[str, tuple[str, ...]] | None, topic: str, broker_id: int, partition_id: int
) -> bool:
    """Whether partition ``broker_id:partition_id`` of ``topic`` is selected (``*:pid`` = any broker)."""
    if assign is None:
        return True
    keys = assign.get(topic, ())
    return f"{broker_id}:{partition_id}" in keys or f"*:{partition_id}" in keys


def _check_offsets_topics(
    option: str,
    spec: OffsetSpec | None,
    topics: tuple[str, ...],
    assign: Mapping[str, tuple[str, ...]] | None,
) -> None:
    if not isinstance(spec, dict):
        return
    for topic in spec:
        if topic not in topics:
            raise ConfigError(
                option, f"names topic {topic!r}, which is not read (topics: {', '.join(topics)})"
            )
        if assign is not None:
            for key in spec[topic]:
                b, p = (int(x) for x in key.split(":"))
                if not assign_matches(assign, topic, b, p):
                    raise ConfigError(
                        option, f"names partition {key} of topic {topic!r}, which is not in '{ASSIGN}'"
                    )


def _parse_stream_ids(text: str | None, topics: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    if text is None:
        return {}
    text = text.strip()
    if not text:
        raise ConfigError(STREAM_IDS, "must not be empty")
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ConfigError(STREAM_IDS, f"is not valid JSON ({exc})") from None
        if not isinstance(data, dict):
            raise ConfigError(STREAM_IDS, 'expected "s1,s2" or JSON like {"topic": ["s1", "s2"]}')
        out: dict[str, tuple[str, ...]] = {}
        for topic, ids in data.items():
            if topic not in topics:
                raise ConfigError(STREAM_IDS, f"names topic {topic!r}, which is not read")
            if not isinstance(ids, list) or not ids or not all(isinstance(i, str) and i.strip() for i in ids):
                raise ConfigError(STREAM_IDS, f"topic {topic!r} needs a non-empty list of stream id strings")
            out[topic] = tuple(sorted({_stream_id(i) for i in ids}))
        return out
    ids = tuple(sorted({_stream_id(i) for i in text.split(",") if i.strip()}))
    if not ids:
        raise ConfigError(STREAM_IDS, "must name at least one stream id")
    return {t: ids for t in topics}


def _stream_id(text: str) -> str:
    text = text.strip()
    if not text or any(c in text for c in ",=#:;'\" "):
        raise ConfigError(STREAM_IDS, f"bad stream id {text!r}")
    return text


def _value_format(o: _Opts) -> str:
    value = (o.string(VALUE_FORMAT, "raw") or "raw").lower()
    if value not in VALUE_FORMATS:
        raise ConfigError(VALUE_FORMAT, f"must be one of {', '.join(VALUE_FORMATS)} (got {value!r})")
    return value


def _time_zone(o: _Opts) -> str | None:
    name = o.string(MSG_TIME_ZONE)
    if name is None:
        return None
    try:
        import zoneinfo

        zoneinfo.ZoneInfo(name)
    except Exception:  # noqa: BLE001 - ZoneInfo raises several types (ValueError, KeyError, ...)
        raise ConfigError(
            MSG_TIME_ZONE, f"unknown time zone {name!r} (use an IANA name such as 'UTC')"
        ) from None
    return name


def _check_unknown(o: _Opts, known: tuple[str, ...], what: str) -> None:
    lowered = {k.lower(): k for k in known}
    all_names = {k.lower(): k for k in READ_OPTIONS + WRITE_OPTIONS}
    for key in o.raw:
        if key in lowered or key.startswith(CLIENT_PREFIX) or key in _SPARK_GENERIC:
            continue
        if key in KAFKA_UNSUPPORTED:
            raise ConfigError(key, KAFKA_UNSUPPORTED[key])
        if key.startswith("kafka."):
            raise ConfigError(key, "kafka.* options configure a Kafka client and do not apply: the tubemq source "
                              "takes tubemq.master and tubemq.<client setting> (e.g. tubemq.rpc_timeout_ms)")
        if key in all_names:
            log.warning("option %r is not used for a %s and is ignored", all_names[key], what)
            continue
        if (guess := closest(key, known)) is not None:
            raise ConfigError(key, f"unknown option; did you mean {guess!r}?")
        log.warning("unknown option %r is ignored by the tubemq %s", key, what)


def _config_class(kind: str) -> type:
    if kind == "producer":
        from ..config import ProducerConfig

        return ProducerConfig
    from ..config import ConsumerConfig

    return ConsumerConfig


#: Client settings this source manages itself (a ``tubemq.*`` option for them would be ignored or clash).
_RESERVED_CLIENT = {"master", "stats_callback", "partitioner", "group", "topics", "consume_from"}


def _client_options(o: _Opts, master: str, kind: str) -> dict[str, Any]:
    """``tubemq.*`` options -> typed keyword options for the client, validated by building its config."""
    wanted = {
        k[len(CLIENT_PREFIX) :]: v for k, v in o.raw.items() if k.startswith(CLIENT_PREFIX) and k != MASTER
    }
    if not wanted:
        return {}
    cls = _config_class(kind)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    by_loose = {name.replace("_", "").lower(): name for name in fields}
    out: dict[str, Any] = {}
    for key, raw in sorted(wanted.items()):
        option = CLIENT_PREFIX + key
        name = by_loose.get(key.replace("_", "").lower())
        if name in _RESERVED_CLIENT:
            raise ConfigError(
                option,
                "is managed by the source (reads use private groups; see groupIdPrefix and commitOffsetsToGroup)",
            )
        if name is None:
            known = ", ".join(CLIENT_PREFIX + n for n in sorted(fields) if n not in _RESERVED_CLIENT)
            raise ConfigError(option, f"not a {kind} setting (known: {known})")
        out[name] = _convert_field(option, fields[name], raw)
    probe: dict[str, Any] = {"group": "spark-options-check"} if "group" in fields else {}
    try:
        cls(master=master, **probe, **out)
    except ConfigError as exc:
        raise ConfigError(CLIENT_PREFIX + exc.field, str(exc).split(": ", 1)[-1]) from None
    except TypeError as exc:
        raise ConfigError(CLIENT_PREFIX + "*", f"rejected by {cls.__name__}: {exc}") from None
    return out


def _convert_field(option: str, f: dataclasses.Field[Any], raw: str) -> Any:
    ann = str(f.type).replace(" ", "")
    default = f.default
    text = raw.strip()
    try:
        if isinstance(default, bool) or ann in ("bool", "bool|None"):
            low = text.lower()
            if low not in _TRUE | _FALSE:
                raise ValueError(raw)
            return low in _TRUE
        if (isinstance(default, int) and not isinstance(default, bool)) or ann in ("int", "int|None"):
            return int(text)
        if isinstance(default, float) or ann in ("float", "float|None"):
            return float(text)
    except ValueError:
        raise ConfigError(option, f"bad value {raw!r} (expected {ann})") from None
    if "list" in ann and "str" not in ann.split("|")[0]:
        return [x.strip() for x in text.split(",") if x.strip()]
    return text
