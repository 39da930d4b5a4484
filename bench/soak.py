"""Reliability soak: the long version of ``tests/reliability`` (issue 11).

1. Fuzzing: every decoder of both codecs (Cython and the pure-Python twin) gets N seeded inputs
   (mutated legal encodings: bit flips, truncations, insertions, splices, extreme varints, random
   bytes). Each decoder runs in its own child process, so a crash (a signal) is counted, not fatal.
   Per input: a typed ``TubeMQError`` (or a result) is fine; any other exception is an *untyped
   error*; a different outcome from the other codec on the same input is a *disagreement*.
2. SIGKILL trials: the server (``python -m tubemq serve``, a child process) is SIGKILLed while a
   producer streams M messages; after a restart every partition is read back: acknowledged messages
   missing (*lost*) or stored twice (*duplicates*).
3. Consumer churn: members of one group join, leave and are SIGKILLed (child processes) for S seconds
   while messages flow: a partition registered by two members at once is *held twice*; every
   acknowledged message must be delivered.
4. Network faults: an embedded cluster (default timers) behind ``tubemq.testing`` fault proxies, a
   producer and a consumer group of 2 (default client settings) through a blackhole, resets and a peer
   that vanishes without a FIN (10 s, 10 s, 40 s): *recovery* is the time from the network's return
   until every partition delivers a message acknowledged after it; every acknowledged message must be
   delivered.

It prints one table (inputs tried, crashes, untyped errors, disagreements, acknowledged lost,
duplicates, partitions held twice, peak RSS: of the fuzz worker, or of the soak process, which hosts the
clients of the crash scenarios). Every loop is bounded in count and time; a fuzz input gets 1 s and a
fuzz worker 768 MiB (a decoder that allocates without bound shows up as a hang or an untyped
MemoryError instead of taking the machine down).

Usage::

    python bench/soak.py            # the full run: 1M inputs per decoder, 3 x 100k SIGKILL, 60 s churn
    python bench/soak.py --quick    # a few minutes: 20k inputs, 1 x 5k SIGKILL, 10 s churn
    python bench/soak.py --fuzz 200000 --kill-trials 2 --kill-messages 20000 --churn-seconds 30
    python bench/soak.py --only network            # the network faults alone (about 2 minutes)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import signal
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

# ---------------------------------------------------------------------------------------------- fuzz


def _seeds(c: Any) -> dict[str, list[Any]]:
    """Legal inputs per decoder, built with the codec's own encoders and the protobuf classes."""
    from tubemq.protocol import broker_pb

    p = c.Partition(1, "127.0.0.1", 8123, "topic_a", 3)
    payloads = [c.encode_payload(b"hello", {"k": "v"}), c.encode_payload(b"x" * 300, None)]
    msgs = [broker_pb.TransferedMessage(messageId=i, checkSum=c.crc32(d), payLoadData=d,
                                        flag=c.payload_flag({"k": "v"} if i == 0 else None))
            for i, d in enumerate(payloads)]
    gm = broker_pb.GetMessageResponseB2C(success=True, errCode=200, errMsg="OK", messages=msgs,
                                         currOffset=140, maxOffset=9000, currDataDlt=5)
    send = broker_pb.SendMessageResponseB2P(success=True, errCode=200, errMsg="OK", messageId=77,
                                            appendTime=1700000000000, appendOffset=12)
    req = c.encode_request(5, 1, 2, b"\x08\x01\x12\x03abc", timeout_ms=3000)
    rsp = c.encode_response(5, 2, b"\x08\x01\x10\xc8\x01")
    err = c.encode_error_response(6, "org.apache.TubeMQException", "boom")
    return {
        "frame_decoder": [req + rsp, err, c.encode_frame(9, b"y" * 20000)],
        "decode_request": [req[12 + 4:]],
        "decode_response": [rsp[12 + 4:], err[12 + 4:]],
        "decode_send_response": [send.SerializeToString()],
        "decode_get_message_response": [gm.SerializeToString()],
        "parse_topic_info": ["topic_a#1:3:1", "t2#1:2:4,2:1:1", "t#1:3:1:1"],
        "parse_topic_meta_info": ["topic_a#1:3:2:1", "t#2:1:1:2"],
        "parse_partition": [str(p), "2:127.0.0.1:8123#t:0"],
        "parse_subscribe_info": [f"consumer1@group1#{p}"],
        "parse_broker_info": ["1:127.0.0.1:8123", "2:10.0.0.1: "],
        "decode_payload": [(payloads[0], 1), (payloads[1], 0)],
        "decode_attributes": ["a=1,b=2", "$msgType$=s1,$msgTime$=202401011200"],
    }


def _call(c: Any, name: str, value: Any) -> Any:
    brokers = {1: c.BrokerInfo(1, "127.0.0.1", 8123), 2: c.BrokerInfo(2, "127.0.0.2", 8123)}
    if name == "frame_decoder":
        dec, out, pos, rng = c.FrameDecoder(), [], 0, random.Random(len(value))
        while pos < len(value):
            step = rng.randint(1, 64)
            out += dec.feed(value[pos:pos + step])
            pos += step
        return [(s, bytes(b)) for s, b in out]
    if name == "decode_get_message_response":
        r = c.decode_get_message_response(value, "topic_a", c.Partition(1, "127.0.0.1", 8123, "topic_a", 3))
        return (r.err_code, r.curr_offset, r.max_offset, r.dropped, [(m.message_id, m.data) for m in r.messages])
    if name == "parse_topic_info":
        return c.parse_topic_info([value], brokers)
    if name == "parse_topic_meta_info":
        return c.parse_topic_meta_info([value], brokers)
    if name == "decode_payload":
        return c.decode_payload(*value)
    return getattr(c, name)(value)


def _mutate(rng: random.Random, seed: Any) -> Any:
    if isinstance(seed, tuple):
        return (_mutate(rng, seed[0]), rng.choice([0, 1, seed[1], rng.getrandbits(32)]))
    text = isinstance(seed, str)
    b = bytearray(seed.encode("utf-8", "surrogatepass") if text else seed)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(7)
        if op == 0 and b:  # bit flip
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
        elif op == 1 and b:  # truncate
            del b[rng.randrange(len(b)):]
        elif op == 2:  # insert random bytes
            i = rng.randint(0, len(b))
            b[i:i] = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 8)))
        elif op == 3:  # extreme varint / number
            i = rng.randint(0, len(b))
            b[i:i] = rng.choice([b"\xff" * 10 + b"\x01", b"\x80" * 11, struct.pack(">I", rng.getrandbits(32)),
                                 b"9" * rng.randint(5, 40), b"-1", b":", b"#", b",", "٠".encode()])
        elif op == 4 and len(b) > 2:  # splice a slice of itself
            i, j = sorted(rng.sample(range(len(b)), 2))
            k = rng.randint(0, len(b))
            b[k:k] = b[i:j]
        elif op == 5:  # random bytes
            b = bytearray(rng.getrandbits(8) for _ in range(rng.randint(0, 64)))
        elif op == 6 and b:  # byte set to a boundary value
            b[rng.randrange(len(b))] = rng.choice([0, 0x7F, 0x80, 0xFF])
    return b.decode("utf-8", "replace") if text else bytes(b)


def fuzz_worker(decoder: str, codec_name: str, n: int, seed: int, time_limit: float) -> dict[str, Any]:
    """Runs in a child process; ``codec_name`` picks the live codec, the other one is the referee."""
    from tubemq.codec import python as _codec_py
    from tubemq.errors import TubeMQError

    _cy: Any
    try:
        from tubemq.codec import compiled as _cy
    except ImportError:
        _cy = None
    live = _cy if codec_name == "cython" else _codec_py
    other = _codec_py if codec_name == "cython" else _cy
    if live is None:
        return {"skipped": "the Cython extension is not built"}
    rng = random.Random(seed)
    seeds = _seeds(live)[decoder]
    # a hostile input must not take the machine down: memory is capped (MemoryError counts as an
    # untyped error) and each input gets INPUT_TIME_LIMIT seconds (then it counts as a hang)
    resource.setrlimit(resource.RLIMIT_AS, (WORKER_MEMORY_LIMIT, WORKER_MEMORY_LIMIT))

    def on_alarm(signum: int, frame: Any) -> None:
        raise _Hang()

    signal.signal(signal.SIGALRM, on_alarm)

    def outcome(c: Any, value: Any) -> tuple[str, Any]:
        try:
            signal.setitimer(signal.ITIMER_REAL, INPUT_TIME_LIMIT)
            try:
                result = _call(c, decoder, value)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            return "ok", result
        except _Hang:
            return "hang", f"> {INPUT_TIME_LIMIT:g} s"
        except TubeMQError as exc:
            return "typed", type(exc).__name__
        except Exception as exc:  # noqa: BLE001 - counting them is the point
            return "untyped", f"{type(exc).__name__}: {exc}"[:200]

    c = {"tried": 0, "untyped": 0, "hangs": 0, "disagree": 0}
    examples: list[str] = []
    deadline = time.monotonic() + time_limit
    while c["tried"] < n and time.monotonic() < deadline:
        value = _mutate(rng, rng.choice(seeds))
        c["tried"] += 1
        kind, detail = outcome(live, value)
        if kind in ("untyped", "hang"):
            c["untyped" if kind == "untyped" else "hangs"] += 1
            if len(examples) < 3:
                examples.append(f"{kind} {detail} on {value!r:.100}")
        if other is not None and codec_name == "cython":  # compare once per pair
            if outcome(other, value) != (kind, detail):
                c["disagree"] += 1
                if len(examples) < 6:
                    examples.append(f"disagree on {value!r:.100}")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {**c, "rss_mb": rss, "examples": examples}


class _Hang(BaseException):
    """Raised by the per-input alarm (a BaseException so decoders' ``except Exception`` miss it)."""


DEFAULT_TIME_LIMIT = 1800.0
#: per-input time and per-worker memory caps of the fuzz workers
INPUT_TIME_LIMIT = 1.0
WORKER_MEMORY_LIMIT = 768 * 1024**2


DECODERS = [
    "frame_decoder", "decode_request", "decode_response", "decode_send_response", "decode_get_message_response",
    "parse_topic_info", "parse_topic_meta_info", "parse_partition", "parse_subscribe_info", "parse_broker_info",
    "decode_payload", "decode_attributes",
]


def run_fuzz(n: int, seed: int, time_limit: float) -> list[dict[str, Any]]:
    rows = []
    for codec_name in ("cython", "python"):
        for decoder in DECODERS:
            env = dict(os.environ)
            if codec_name == "python":
                env["TUBEMQ_NO_EXTENSIONS"] = "1"
            cmd = [sys.executable, __file__, "--fuzz-worker", decoder, "--codec", codec_name,
                   "--fuzz", str(n), "--seed", str(seed), "--time-limit", str(time_limit)]
            row: dict[str, Any] = {"scenario": f"fuzz {codec_name} {decoder}", "crashes": 0}
            try:
                proc = subprocess.run(cmd, capture_output=True, env=env, timeout=time_limit + 120)
            except subprocess.TimeoutExpired:
                row.update(tried=0, untyped=0, hangs=1, examples=["worker did not finish (killed)"])
                rows.append(row)
                continue
            if proc.returncode != 0:
                row.update(tried=0, untyped=0, crashes=1,
                           examples=[f"exit {proc.returncode}: {proc.stderr.decode()[-300:]}"])
            else:
                row.update(json.loads(proc.stdout.decode().strip().splitlines()[-1]))
            rows.append(row)
            print(f"  {row['scenario']}: {row.get('tried', 0)} inputs", file=sys.stderr)
    return rows


# ---------------------------------------------------------------------------------------------- table

COLUMNS = [("scenario", 42), ("inputs tried", 12), ("crashes", 7), ("hangs", 5), ("untyped errors", 14),
           ("disagreements", 13), ("acked lost", 10), ("duplicates", 10), ("held twice", 10),
           ("recovery s", 10), ("peak RSS MB", 11)]


def print_table(rows: list[dict[str, Any]]) -> None:
    keys = ["scenario", "tried", "crashes", "hangs", "untyped", "disagree", "lost", "duplicates", "held_twice",
            "recovery", "rss_mb"]
    print(" | ".join(name.ljust(w) for name, w in COLUMNS))
    print("-|-".join("-" * w for _, w in COLUMNS))
    for row in rows:
        cells = []
        for key, (_, w) in zip(keys, COLUMNS, strict=True):
            v = row.get(key, "-")
            cells.append((f"{v:.0f}" if isinstance(v, float) else str(v)).ljust(w))
        print(" | ".join(cells))
    for row in rows:
        for ex in row.get("examples", [])[:3]:
            print(f"  {row['scenario']}: {ex}")


def _self_rss() -> float:
    """Peak RSS of this process: the producer and in-process consumers of the crash scenarios."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_kill(trials: int, messages: int) -> list[dict[str, Any]]:
    from reliability.scenarios import kill_mid_produce

    rows = []
    for trial in range(trials):
        with tempfile.TemporaryDirectory(prefix="tubemq-soak-") as d:
            t0 = time.monotonic()
            res = kill_mid_produce(Path(d), messages, kill_after=messages // 2, trial=trial)
        rows.append({"scenario": f"SIGKILL trial {trial + 1} ({res.acked}/{messages} acked)",
                     "tried": res.sent, "untyped": res.untyped_errors, "lost": res.lost,
                     "duplicates": res.duplicates, "rss_mb": _self_rss()})
        print(f"  SIGKILL trial {trial + 1}: {res} in {time.monotonic() - t0:.0f} s", file=sys.stderr)
    return rows


def run_churn(seconds: float) -> dict[str, Any]:
    from reliability.scenarios import ServerProcess, consumer_churn

    with tempfile.TemporaryDirectory(prefix="tubemq-soak-") as d:
        server = ServerProcess(Path(d)).start()
        try:
            server.create_topic("soak_churn", 8)
            res = consumer_churn(server.master, "soak_churn", seconds, members=4, seed=11)
        finally:
            server.stop()
    print(f"  churn: {res.joins} joins, {res.leaves} leaves, {res.kills} kills, {res.samples} samples, "
          f"{res.produced} produced, {len(res.errors)} send errors", file=sys.stderr)
    return {"scenario": f"consumer churn {seconds:.0f} s ({res.kills} SIGKILLs)", "tried": res.produced,
            "lost": res.missing, "held_twice": res.held_twice, "rss_mb": _self_rss()}


#: (fault, seconds) of the network part; quick runs use 3 s faults
NETWORK_FAULTS = [("blackhole", 10.0), ("reset", 10.0), ("vanish", 40.0)]


def run_network(quick: bool) -> list[dict[str, Any]]:
    from reliability.network_faults import group_through_fault

    from tubemq.server import EmbeddedCluster
    from tubemq.testing import proxy_cluster

    rows = []
    for fault, seconds in NETWORK_FAULTS:
        seconds = 3.0 if quick else seconds
        with tempfile.TemporaryDirectory(prefix="tubemq-soak-") as d, EmbeddedCluster(d) as cluster, \
                proxy_cluster(cluster) as proxies:
            res = group_through_fault(cluster, proxies, fault, seconds, topic=f"soak_{fault}", partitions=4,
                                      recover_limit=120.0, drain_limit=120.0)
        print(f"  network: {res}", file=sys.stderr)
        for err in res.errors[:3]:
            print(f"    {err}", file=sys.stderr)
        rows.append({"scenario": f"{fault} {seconds:g} s, group of 2", "tried": res.acked, "lost": res.lost,
                     "untyped": res.untyped_errors, "hangs": int(res.recovery_s is None or bool(res.errors)),
                     "recovery": "-" if res.recovery_s is None else f"{res.recovery_s:.2f}",
                     "rss_mb": _self_rss()})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a scaled-down run (a few minutes)")
    ap.add_argument("--fuzz", type=int, default=None, help="inputs per decoder and codec (full: 1000000)")
    ap.add_argument("--kill-trials", type=int, default=None, help="SIGKILL trials (full: 3)")
    ap.add_argument("--kill-messages", type=int, default=None, help="messages per SIGKILL trial (full: 100000)")
    ap.add_argument("--churn-seconds", type=float, default=None, help="consumer churn duration (full: 60)")
    ap.add_argument("--seed", type=int, default=20261123)
    ap.add_argument("--time-limit", type=float, default=DEFAULT_TIME_LIMIT,
                    help="cap per fuzz worker, seconds (quick: 60)")
    ap.add_argument("--only", choices=("fuzz", "kill", "churn", "network"), action="append",
                    help="run only these parts")
    ap.add_argument("--fuzz-worker", help=argparse.SUPPRESS)
    ap.add_argument("--codec", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.fuzz_worker:
        print(json.dumps(fuzz_worker(args.fuzz_worker, args.codec, args.fuzz, args.seed, args.time_limit)))
        return 0
    full: dict[str, Any] = {"fuzz": 1_000_000, "kill_trials": 3, "kill_messages": 100_000, "churn": 60.0}
    quick: dict[str, Any] = {"fuzz": 20_000, "kill_trials": 1, "kill_messages": 5_000, "churn": 10.0}
    if args.quick and args.time_limit == DEFAULT_TIME_LIMIT:
        args.time_limit = 60.0
    base = quick if args.quick else full
    n = args.fuzz if args.fuzz is not None else base["fuzz"]
    trials = args.kill_trials if args.kill_trials is not None else base["kill_trials"]
    messages = args.kill_messages if args.kill_messages is not None else base["kill_messages"]
    churn = args.churn_seconds if args.churn_seconds is not None else base["churn"]
    parts = set(args.only or ("fuzz", "kill", "churn", "network"))
    t0 = time.monotonic()
    rows: list[dict[str, Any]] = []
    steps: list[tuple[str, Callable[[], Any]]] = [
        ("fuzz", lambda: rows.extend(run_fuzz(n, args.seed, args.time_limit))),
        ("kill", lambda: rows.extend(run_kill(trials, messages))),
        ("churn", lambda: rows.append(run_churn(churn))),
        ("network", lambda: rows.extend(run_network(args.quick))),
    ]
    for name, step in steps:
        if name in parts:
            print(f"{name}...", file=sys.stderr)
            step()
    custom = any(v is not None for v in (args.fuzz, args.kill_trials, args.kill_messages, args.churn_seconds))
    label = "custom" if custom or args.only else "quick" if args.quick else "full"
    what = {"fuzz": f"fuzz {n}/decoder", "kill": f"{trials} x {messages} SIGKILL", "churn": f"{churn:.0f} s churn",
            "network": "network faults" + (" of 3 s" if args.quick else "")}
    print(f"\nsoak: {label} run ({', '.join(what[p] for p, _ in steps if p in parts)}), "
          f"{time.monotonic() - t0:.0f} s, python {sys.version.split()[0]}\n")
    print_table(rows)
    bad = sum(int(r.get(k, 0) or 0) for r in rows for k in ("crashes", "hangs", "untyped", "lost", "duplicates", "held_twice"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
