"""value_serializer / key_serializer / value_deserializer through both APIs, over real TCP."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import tubemq
import tubemq.aio
import tubemq.serializers
from tubemq.config import ConsumerConfig, ProducerConfig
from tubemq.errors import ConfigError, SerializationError

FAST = {"heartbeat_period_ms": 300, "rpc_timeout_ms": 5000}
CONSUMER = {"heartbeat_period_ms": 300, "rpc_timeout_ms": 5000, "msg_not_found_wait_ms": 50,
            "consume_from": "earliest", "iter_timeout_ms": 3000}


def test_resolve_names_codecs_and_callables() -> None:
    cfg = ProducerConfig(master="127.0.0.1:8715", value_serializer="json")
    assert cfg.serialize_hook is not None
    assert cfg.serialize_hook("t", {"a": [1, "é"]}, None) == ('{"a":[1,"é"]}'.encode(), None)
    assert ProducerConfig(master="127.0.0.1:8715").serialize_hook is None  # nothing called when unset
    cfg = ProducerConfig(master="127.0.0.1:8715", value_serializer=tubemq.serializers.string,
                         key_serializer=lambda k: str(k).encode())
    assert cfg.serialize_hook is not None and cfg.serialize_hook("t", "x", 7) == (b"x", b"7")
    c = ConsumerConfig(master="127.0.0.1:8715", group="g", topics=["t"], value_deserializer="json")
    assert c.deserialize is not None and c.deserialize(b'{"k": 1}') == {"k": 1}
    dsn = ProducerConfig.from_dsn("tubemq://127.0.0.1:8715?value_serializer=json")
    assert dsn.serialize_hook is not None
    with pytest.raises(ConfigError) as err:
        ProducerConfig(master="127.0.0.1:8715", value_serializer="yaml")
    assert err.value.field == "value_serializer" and "json" in str(err.value)
    with pytest.raises(ConfigError):
        ConsumerConfig(master="127.0.0.1:8715", group="g", topics=["t"], value_deserializer=42)


def test_serializer_errors_are_typed() -> None:
    cfg = ProducerConfig(master="127.0.0.1:8715", value_serializer="json")
    assert cfg.serialize_hook is not None
    with pytest.raises(SerializationError) as err:
        cfg.serialize_hook("orders", {1, 2}, None)  # a set is not JSON
    assert err.value.topic == "orders" and isinstance(err.value.__cause__, TypeError)
    assert "value_serializer" in str(err.value) and "orders" in str(err.value)
    with pytest.raises(SerializationError):
        cfg.serialize_hook("orders", float("nan"), None)
    assert issubclass(SerializationError, tubemq.TubeMQError)


def test_sync_json_round_trip(cluster) -> None:
    cluster.create_topic("ser", partitions=2)
    values: list[Any] = [{"id": i, "name": f"n{i}", "tags": ["a", "b"]} for i in range(20)]
    with tubemq.Producer(cluster.master_address, value_serializer="json", key_serializer="str", **FAST) as p:
        results = [p.send("ser", v, key=f"k{v['id'] % 3}") for v in values[:10]]
        futs = [p.send_async("ser", v) for v in values[10:]]
        assert p.flush(timeout=30) == 0
        results += [f.result(timeout=5) for f in futs]
        with pytest.raises(SerializationError):
            p.send("ser", object())
        with pytest.raises(SerializationError):
            p.send_async("ser", object())
    assert len(results) == 20
    got = []
    with tubemq.Consumer(cluster.master_address, group="gser", topics=["ser"],
                         value_deserializer=tubemq.serializers.json, **CONSUMER) as c:
        for msg in c:
            got.append(msg.data)
            if len(got) == 20:
                break
    assert sorted(got, key=lambda v: v["id"]) == values


def test_asyncio_json_round_trip_and_poison_message(cluster) -> None:
    cluster.create_topic("seraio", partitions=1)

    async def main() -> None:
        async with tubemq.aio.Producer(cluster.master_address, value_serializer="json", **FAST) as p:
            await p.send("seraio", {"n": 1})
            async with tubemq.aio.Producer(cluster.master_address, **FAST) as raw:
                await raw.send("seraio", b"not json")  # a poison message for the JSON consumer
            await p.send("seraio", {"n": 2})
        async with tubemq.aio.Consumer(cluster.master_address, group="gseraio", topics=["seraio"],
                                       value_deserializer="json", **CONSUMER) as c:
            first: list[Any] = []
            err: SerializationError | None = None
            deadline = asyncio.get_running_loop().time() + 30
            while err is None and asyncio.get_running_loop().time() < deadline:
                try:
                    batch = await c.poll(1.0)
                except SerializationError as exc:
                    err = exc
                    break
                if batch is not None:
                    first += [m.data for m in batch]
                    await c.confirm(batch)
            assert err is not None, "the poison message never surfaced"
            assert err.message is not None and err.message.data == b"not json"
            assert err.topic == "seraio" and f"message {err.message.message_id} of " in str(err) and ":0" in str(err)
            # the batch was rolled back, not confirmed: it comes again (nothing acknowledged is lost)
            with pytest.raises(SerializationError):
                for _ in range(30):
                    await c.poll(1.0)
            print("decoded before the poison message:", first)
        # a consumer without the deserializer reads all three as bytes: nothing was lost
        async with tubemq.aio.Consumer(cluster.master_address, group="gseraio", topics=["seraio"],
                                       **CONSUMER) as c:
            seen: list[bytes] = []
            async for msg in c:
                seen.append(msg.data)
                if len(seen) == 3 - len(first):
                    break
            assert b"not json" in seen

    asyncio.run(main())


def test_aio_send_nowait(cluster) -> None:
    cluster.create_topic("nowait", partitions=1)

    async def main() -> None:
        p = tubemq.aio.Producer(cluster.master_address, value_serializer="json", max_pending=2, **FAST)
        with pytest.raises(tubemq.TubeMQError, match="started"):
            p.send_nowait("nowait", {"n": 0})
        async with p:
            futs = [p.send_nowait("nowait", {"n": 1}), p.send_nowait("nowait", {"n": 2})]
            with pytest.raises(tubemq.errors.TubeMQTimeoutError, match="buffer full"):
                p.send_nowait("nowait", {"n": 3})  # max_pending=2: refused at once, nothing awaited
            results = await asyncio.gather(*futs)
            assert [r.topic for r in results] == ["nowait", "nowait"]
            again = await p.send_nowait("nowait", 3)  # room again once answered
            assert again.message_id > 0

    asyncio.run(main())


def test_bound_consumer_deserializes_and_rolls_back(cluster) -> None:
    cluster.create_topic("serbound", partitions=1)
    with tubemq.Producer(cluster.master_address, value_serializer="json", **FAST) as p:
        p.send("serbound", {"n": 1})
    with tubemq.BoundConsumer(cluster.master_address, "gserbound", ["serbound"], consume_from="earliest",
                              value_deserializer="json", heartbeat_period_ms=300, rpc_timeout_ms=5000) as bc:
        part = bc.partitions()[0]
        batch = bc.fetch(part, timeout=10.0)
        assert batch is not None and [m.data for m in batch] == [{"n": 1}]
    with tubemq.Producer(cluster.master_address, **FAST) as p:
        p.send("serbound", b"\xff not json")
    with tubemq.BoundConsumer(cluster.master_address, "gserbound2", ["serbound"], consume_from="earliest",
                              value_deserializer=lambda b: b.decode("ascii"),
                              heartbeat_period_ms=300, rpc_timeout_ms=5000) as bc:
        part = bc.partitions()[0]
        with pytest.raises(SerializationError) as err:
            for _ in range(20):
                bc.fetch(part, timeout=1.0)
        assert isinstance(err.value.__cause__, UnicodeDecodeError)
