"""Unit tests of the command line building blocks (no sockets): progress bar, formats, pipeline."""

from __future__ import annotations

import io
import json
import threading
import time
from concurrent.futures import Future
from typing import Any

import pytest

from tubemq.cli.common import CliError, parse_attrs, split_addresses
from tubemq.cli.output import envelope_fields, format_table, message_to_json
from tubemq.cli.pipeline import SendPipeline, StopFlag, percentiles
from tubemq.cli.produce import split_records
from tubemq.cli.progress import ProgressBar, format_count, format_duration
from tubemq.codec import Message, Partition


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_shows_count_rate_eta() -> None:
    stream = _Tty()
    bar = ProgressBar(1000, "send", stream=stream, max_fps=0)
    bar._start = time.monotonic() - 10  # 10 s ago
    bar.update(250)
    text = bar.render()
    assert "250/1.00k" in text and "25.0%" in text
    assert "msg/s" in text and "eta 0:30" in text
    bar.close()
    assert stream.getvalue().startswith("\r") and stream.getvalue().endswith("\n")


def test_progress_bar_silent_without_tty() -> None:
    stream = io.StringIO()
    bar = ProgressBar(10, stream=stream)
    bar.update(5)
    bar.close()
    assert stream.getvalue() == ""
    assert bar.count == 5


def test_progress_bar_thread_safe_counts() -> None:
    bar = ProgressBar(None, stream=io.StringIO(), enabled=True, max_fps=1000)
    threads = [threading.Thread(target=lambda: [bar.update() for _ in range(5000)]) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert bar.count == 20000


def test_formatters() -> None:
    assert format_count(999) == "999"
    assert format_count(1_234_567) == "1.23M"
    assert format_duration(None) == "--:--"
    assert format_duration(3725) == "1:02:05"
    table = format_table(["a", "bb"], [["x", 1], ["yyyy", 22]])
    lines = table.splitlines()
    assert lines[0].split() == ["a", "bb"] and lines[3].split() == ["yyyy", "22"]


def test_parse_attrs_and_addresses() -> None:
    assert parse_attrs(["k=v", "a=b"]) == {"k": "v", "a": "b"}
    for bad in (["k"], ["=v"], ["k=v,w"]):
        with pytest.raises(CliError) as e:
            parse_attrs(bad)
        assert e.value.code == 2
    assert split_addresses("h1:1,h2:2") == ["h1:1", "h2:2"]
    assert split_addresses("tubemq://h1:1,h2:2?x=1") == ["h1:1", "h2:2"]
    for bad in ("h1", "h:0", ":1", ""):
        with pytest.raises(CliError):
            split_addresses(bad)


def test_split_records_custom_delimiter() -> None:
    data = b"a||bb||||ccc"
    assert list(split_records(io.BytesIO(data), b"||")) == [b"a", b"bb", b"", b"ccc"]
    assert list(split_records(io.BytesIO(b"x\ny\n"), b"\n")) == [b"x", b"y"]


def test_message_json_roundtrip() -> None:
    part = Partition(1, "127.0.0.1", 8123, "t", 2)
    for data in (b"hello \xc3\xa9", b"\xff\x00binary"):
        msg = Message("t", data, {"k": "v"}, "s1", None, 7, 0, part, 56)
        line = message_to_json(msg)
        rec = json.loads(line)
        assert rec["partition"] == 2 and rec["offset"] == 56 and rec["attributes"] == {"k": "v"}
        back, attrs, stream = envelope_fields(line)
        assert back == data and attrs == {"k": "v"} and stream == "s1"
    with pytest.raises(ValueError):
        envelope_fields('{"nodata": 1}')


def test_percentiles_nearest_rank() -> None:
    samples = [float(i) for i in range(1, 1001)]
    p = percentiles(samples, (50, 99, 99.9))
    assert p == {50: 500.0, 99: 990.0, 99.9: 999.0}


class _FakeProducer:
    """Completes sends on another thread after a short delay; tracks the peak in-flight count."""

    def __init__(self, fail_every: int = 0) -> None:
        self.inflight = 0
        self.peak = 0
        self.sent: list[bytes] = []
        self.fail_every = fail_every
        self._lock = threading.Lock()

    def send_async(self, topic: str, data: bytes, **kw: Any) -> Future:
        fut: Future = Future()
        with self._lock:
            self.inflight += 1
            self.peak = max(self.peak, self.inflight)
            self.sent.append(data)
            n = len(self.sent)

        def complete() -> None:
            with self._lock:
                self.inflight -= 1
            if self.fail_every and n % self.fail_every == 0:
                fut.set_exception(RuntimeError("boom"))
            else:
                fut.set_result(n)

        threading.Timer(0.001, complete).start()
        return fut


def test_pipeline_bounds_inflight_and_accounts_exactly() -> None:
    prod = _FakeProducer()
    pipe = SendPipeline(prod, "t", inflight=8, record_latency=True)
    for i in range(300):
        assert pipe.submit(b"m%d" % i)
    assert pipe.drain(10) == 0
    assert prod.peak <= 8
    s = pipe.summary()
    assert s["submitted"] == s["acknowledged"] == 300 and s["failed"] == 0
    assert len(pipe.latencies) == 300


def test_pipeline_stops_on_first_error() -> None:
    prod = _FakeProducer(fail_every=50)
    stop = StopFlag()
    pipe = SendPipeline(prod, "t", inflight=4, stop=stop)
    sent = 0
    for i in range(1000):
        if not pipe.submit(b"m%d" % i):
            break
        sent += 1
    assert pipe.drain(10) == 0
    assert stop and stop.reason == "error"
    assert sent < 1000
    s = pipe.summary()
    assert s["acknowledged"] + s["failed"] == s["submitted"] == sent
    assert isinstance(pipe.first_error, RuntimeError)


def test_serve_options_build_server_config(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from tubemq.cli import build_parser
    from tubemq.cli.serve import build_config

    users = tmp_path / "users.txt"
    users.write_text("# comment\nbob:pw2\n")
    args = build_parser().parse_args([
        "serve", "--data-dir", str(tmp_path), "--master-port", "0", "--auth-user", "alice:pw1",
        "--auth-users-file", str(users), "--admin-token", "tok", "--flush", "always", "--retention-ms", "60000",
    ])
    cfg = build_config(args)
    assert cfg.auth_enabled and cfg.visit_token_check and cfg.auth_users == {"alice": "pw1", "bob": "pw2"}
    assert cfg.admin_token == "tok" and cfg.flush == "always" and cfg.retention_ms == 60000
    assert "pw1" not in repr(cfg)
    bad = build_parser().parse_args(["serve", "--data-dir", str(tmp_path), "--auth-user", "nopassword"])
    with pytest.raises(CliError) as e:
        build_config(bad)
    assert e.value.code == 2
    bad = build_parser().parse_args(["serve", "--data-dir", str(tmp_path), "--tls-cert", "c.pem"])
    with pytest.raises(CliError):
        build_config(bad)


def test_idle_clock_waits_for_the_first_assignment() -> None:
    from tubemq.cli.consume import IdleClock

    class _C:
        parts: list[str] = []

        def assignment(self) -> list[str]:
            return self.parts

    c = _C()
    clock = IdleClock(c, timeout=0.05, grace=30)
    time.sleep(0.1)
    assert clock.left() > 20  # not assigned yet: the grace period applies, not the idle timeout
    c.parts = ["1:t:0"]
    assert 0 < clock.left() <= 0.05  # assigned: the idle timeout starts now
    time.sleep(0.1)
    assert clock.left() <= 0
    clock.touch()
    assert clock.left() > 0
    assert IdleClock(c, None).left() == float("inf")
