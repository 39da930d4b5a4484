"""``ServerConfig.time_lookup=False``: the embedded server answers its own ``admin_query_offset_by_time``
as a real TubeMQ 2.5 broker answers it (the recorded body), and the admin client raises the typed error."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from _data import load_json
from _support import embedded_cluster

from tubemq.admin import AdminClient
from tubemq.errors import ConfigError, NoTimeLookupError
from tubemq.server.config import ServerConfig

REAL = "broker: admin_query_offset_by_time (SDK offsets_for_times) is not a real broker method"


def _get(url: str, **params: str) -> dict[str, object]:
    with urllib.request.urlopen(f"{url}?{urllib.parse.urlencode(params)}", timeout=10) as rsp:
        answer: dict[str, object] = json.loads(rsp.read())
        return answer


def test_without_time_lookup_the_answer_is_a_real_brokers(tmp_path: Path) -> None:
    recorded = next(r for r in load_json("admin", "real", "errors.json") if r["name"] == REAL)
    with embedded_cluster(tmp_path / "d", time_lookup=False) as c:
        c.create_topic("tl_off", partitions=1)
        got = _get(c.admin_url, type="op_query", method="admin_query_offset_by_time", topicName="tl_off",
                   timestamp="1796178781181", brokerId="1")
        assert got == json.loads(recorded["body"])
        with pytest.raises(NoTimeLookupError, match="broker 1 has no time lookup.*offset_for_time") as err:
            AdminClient(c.admin_url).offsets_for_times("tl_off", 1796178781181)
        assert err.value.code == 400 and err.value.method == "admin_query_offset_by_time"


def test_time_lookup_is_served_by_default_and_must_be_a_bool(tmp_path: Path) -> None:
    with embedded_cluster(tmp_path / "d") as c:
        c.create_topic("tl_on", partitions=1)
        found = AdminClient(c.admin_url).offsets_for_times("tl_on", 0)
        assert [(t.partition_id, t.offset) for t in found] == [(0, 0)]
    with pytest.raises(ConfigError, match="time_lookup"):
        ServerConfig(data_dir=tmp_path / "x", time_lookup="no")  # type: ignore[arg-type]
