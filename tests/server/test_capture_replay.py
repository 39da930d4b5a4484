"""Replay every client request of the real-server captures against the embedded cluster.

Source: tests/data/captures/*.json (real Apache InLong TubeMQ master + broker, see its README).
All files are replayed, in capture order, against ONE embedded cluster with the capture topics
(cap_main 3, cap_store2 2x2 stores, cap_rebal 3, cap_filter2 3, cap_err 3, cap_big 1 with 2 MiB), so the
data the later scenarios read is the data the earlier ones wrote (s1 fills cap_main exactly as the real
one was filled, s4 writes cap_filter2, s6a/s6c write cap_err).

For every request the answer is compared with the recorded real answer:

* RPC status, exception name and exception message (exactly);
* for successful RPCs: the set of present fields (proto2 presence) at every level, booleans and
  error codes exactly, strings exactly after normalisation (the broker port of this cluster is mapped
  to the real 8123, see ``_normalise``), repeated fields by count and element format;
* values that depend on time or server state (checksums, tokens, ids, offsets, append times,
  rebalance ids) by category: a negative sentinel (-1/-2) must match exactly, any other value only
  has to be a non-negative number as well; ids issued by the server are remembered and substituted
  into later requests (a real client echoes them), so "ids equal => field omitted" rules are tested.

Balancing runs only when the replay asks for it (``balance_period_ms`` is one hour): before each
consumer heartbeat whose recorded answer carried an event, one balance round is run. Then event
presence, opType, count and format of subscribeInfo are compared, and rebalance ids must map 1:1 onto
the recorded ones (s3: the disconnect of A and the delayed connect of B share one id).

Frames that are not compared (KNOWN_DIFFERENCES) are listed with the reason; writes that the raw
capture client made together (s6d) are sent together, split writes are split, "no answer" cases are
checked by waiting for later answers on the same connection and by a final drain.

getMessage answers depend on where the real broker's data sat (memory cache or files) when it was
read, which its flush timer decides (memCacheFlushIntvl 20 s). The replay switches that timer off and
flushes the caches where the capture timeline shows the real one had run (TIMER_FLUSHES, preload), so
every fetch (messages returned, offsets, maxOffset, requireSlow, the three 404 texts) is compared.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import selectors
import socket
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from _data import load_capture
from _pbcompat import is_repeated
from _support.wire import response_class
from google.protobuf.message import Message

from tubemq import codec
from tubemq.protocol import broker_pb, master_pb
from tubemq.server import wire

ORDER = [
    "s1_producer",
    "s2_consumer_pull",
    "s3_rebalance",
    "s4_filter",
    "s5_client_balance",
    "s6a_errors_send",
    "s6b_errors_master",
    "s6c_errors_consumer_broker",
    "s6d_errors_transport",
]
TOPICS = [
    ("cap_main", 3, 1, None),
    ("cap_store2", 2, 2, None),
    ("cap_rebal", 3, 1, None),
    ("cap_filter2", 3, 1, None),
    ("cap_err", 3, 1, None),
    ("cap_big", 1, 1, 2 * 1024 * 1024),
]
REAL_BROKER_PORT = 8123


#: (file, conn_id, serial, occurrence) -> why this answer is not compared.
KNOWN_DIFFERENCES: dict[tuple[str, int, int], str] = {
    (
        "s6d_errors_transport",
        4,
        1,
    ): "timeout 1 ms is racy (README item 10): answered in one real run, not in another",
}

REQUEST_TYPES: dict[int, type[Message]] = {
    1: master_pb.RegisterRequestP2M,
    2: master_pb.HeartRequestP2M,
    4: master_pb.RegisterRequestC2M,
    5: master_pb.HeartRequestC2M,
    20: master_pb.RegisterRequestC2MV2,
    21: master_pb.HeartRequestC2MV2,
    22: master_pb.GetPartMetaRequestC2M,
}

#: Server-issued ids a client echoes back; recorded value -> ours is learnt from answers.
ECHOED_IDS = {"brokerCheckSum", "brokerConfigId", "topicMetaInfoId"}
#: Values that depend on time or state: compared by category (sentinel exactly, else >= 0). Among
#: them ``currDataDlt`` and a 404's ``minLimitTime`` (the store's data max, e.g. 835 in s4) count bytes
#: of the broker's DATA file: the real broker stores 52 + n bytes per message, we store the on-wire
#: TransferedMessage (about n + 20), so those values differ by design (semantics match: broker _read).
STATE_INTS = ECHOED_IDS | {
    "visitAuthorizedToken",
    "rebalanceId",
    "messageId",
    "appendTime",
    "appendOffset",
    "currOffset",
    "maxOffset",
    "currDataDlt",
    "minLimitTime",
}
STATUS_NAMES = {0: "SUCCESS", 1: "ERROR", 2: "FATAL"}
#: Index offsets (28 bytes per message, docs/PROTOCOL.md §4.10) follow from what the replay wrote (topics
#: created empty, cap_err preloaded as recorded), so they are compared exactly: where a read starts
#: (currOffset), what it reports as max (maxOffset: the files' max for filtered reads, s6c 924 of 1148)
#: and where appends land.
EXACT_OFFSETS = {"currOffset", "maxOffset", "appendOffset"}


# ----------------------------------------------------------------------------------------------------
# the replay engine


class Conn:
    """A raw TCP connection with a tolerant frame decoder and a per-serial answer inbox."""

    def __init__(self, address: str) -> None:
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.decoder = codec.FrameDecoder()
        self.inbox: dict[int, deque[bytes]] = {}

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _pump(self, timeout: float) -> bool:
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(1 << 20)
        except TimeoutError:
            return False
        if not data:
            raise ConnectionError("server closed the connection")
        for serial, payload in self.decoder.feed(data):
            self.inbox.setdefault(serial, deque()).append(payload)
        return True

    def wait(self, serial: int, timeout: float = 15.0) -> bytes | None:
        deadline = time.monotonic() + timeout
        while not self.inbox.get(serial):
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self._pump(min(left, 1.0))
        return self.inbox[serial].popleft()

    def unexpected(self) -> dict[int, int]:
        return {s: len(q) for s, q in self.inbox.items() if q}

    def close(self) -> None:
        self.sock.close()


def drain_all(conns: dict[int, Conn], quiet: float = 0.3) -> set[int]:
    """Read every connection until none has sent anything for ``quiet`` seconds (each one gets at least
    that long after its last byte, as the one-by-one drain did, but the waits overlap instead
    of adding up over a capture's connections). The ids of those the server closed."""
    closed: set[int] = set()
    with selectors.DefaultSelector() as sel:
        for conn_id, conn in conns.items():
            sel.register(conn.sock, selectors.EVENT_READ, conn_id)
        while sel.get_map():
            ready = sel.select(quiet)
            if not ready:
                break
            for key, _ in ready:
                try:
                    conns[key.data]._pump(quiet)
                except ConnectionError:  # closed by the server (EOF or reset)
                    closed.add(key.data)
                    sel.unregister(key.fileobj)
    return closed


@dataclass
class Outcome:
    """Result of one replayed request."""

    key: tuple[str, int, int]
    case: str
    method: int | None
    problems: list[str] = field(default_factory=list)
    skipped: str = ""


@dataclass
class Step:
    """One TCP write of the capture client (one or more frames, or part of one)."""

    conn_id: int
    data: bytes
    frames: list[dict[str, Any]]  # the c2* entries making up this write


def _frame_bytes(entry: dict[str, Any]) -> bytes:
    """What the real server received: relay-rewritten bytes, or a byte-exact rebuild of cut frames."""
    if entry.get("rewritten_hex"):
        return bytes.fromhex(entry["rewritten_hex"])
    if not entry.get("hex_truncated"):
        return bytes.fromhex(entry["hex"])
    dec = entry["decoded"]
    m = dec["message"]
    body = broker_pb.SendMessageRequestP2B(
        clientId=m["clientId"],
        topicName=m["topicName"],
        partitionId=m["partitionId"],
        data=bytes.fromhex(m["data"]["hex_prefix"][:2]) * m["data"]["len"],
        flag=m["flag"],
        checkSum=m["checkSum"],
        sentAddr=m["sentAddr"],
    )
    body.authInfo.visitAuthorizedToken = m["authInfo"]["visitAuthorizedToken"]
    frame = codec.encode_request(
        entry["serial"],
        dec["request_header"]["serviceType"],
        dec["method"],
        body.SerializeToString(),
        timeout_ms=dec["request_body"]["timeout"],
        protocol_ver=dec["request_header"]["protocolVer"],
    )
    assert hashlib.sha256(frame).hexdigest() == entry["sha256"], "rebuild of a cut frame is not byte-exact"
    return frame


def _steps(frames: list[dict[str, Any]]) -> Iterator[Step]:
    """Group client frames into the TCP writes the capture client made (s6d notes)."""
    c2 = [f for f in frames if f["direction"] in ("c2m", "c2b")]
    i = 0
    while i < len(c2):
        note = c2[i].get("note", "")
        size = 1
        m = re.search(r"with (\d+) other part", note) or re.search(r"frame \d+ of (\d+) written in one", note)
        if m:
            size = int(m.group(1)) + (1 if "other part" in m.group(0) else 0)
        group = c2[i : i + size]
        yield Step(c2[i]["conn_id"], b"".join(_frame_bytes(f) for f in group), group)
        i += size


class Replayer:
    """Replays one capture file against the cluster and compares every answer."""

    def __init__(self, name: str, data: dict[str, Any], cluster: Any, ids: dict[str, dict[int, int]]) -> None:
        self.name = name
        self.data = data
        self.cluster = cluster
        self.ids = ids  # field -> {recorded: ours}, shared across files (one master)
        self.rebalance_ids: dict[int, int] = {}
        self.broker_port = int(cluster.broker_address.rsplit(":", 1)[1])
        self.conns: dict[int, Conn] = {}
        self.to = {c["conn_id"]: c["to"] for c in data["connections"]}
        self.outcomes: list[Outcome] = []
        # expected answers: (conn, serial) -> queue of recorded response entries
        self.expected: dict[tuple[int, int], deque[dict[str, Any]]] = {}
        for f in data["frames"]:
            if f["direction"] in ("m2c", "b2c"):
                self.expected.setdefault((f["conn_id"], f["serial"]), deque()).append(f)
        self.seen: dict[tuple[int, int], int] = {}

    def conn(self, conn_id: int) -> Conn:
        if conn_id not in self.conns:
            addr = (
                self.cluster.master_address if self.to[conn_id] == "master" else self.cluster.broker_address
            )
            self.conns[conn_id] = Conn(addr)
        return self.conns[conn_id]

    def on_loop(self, fn: Callable[[], Any]) -> Any:
        async def call() -> Any:
            return fn()

        return asyncio.run_coroutine_threadsafe(call(), self.cluster.loop).result(30)

    # ---- request rewriting: echo our ids where the real client echoed the real master's

    def _substitute(self, msg: Message, sent_at_ms: int) -> bool:
        changed = False
        for fd, value in msg.ListFields():
            if fd.type == fd.TYPE_MESSAGE and not is_repeated(fd):
                changed |= self._substitute(value, sent_at_ms)
            elif fd.name in ECHOED_IDS and value in self.ids.get(fd.name, {}):
                setattr(msg, fd.name, self.ids[fd.name][value])
                changed = True
            elif fd.name == "lstAssignedTime" and value > 0:
                # a client clock reading: keep its age relative to the request, not its absolute value
                setattr(msg, fd.name, int(time.time() * 1000) - (sent_at_ms - value))
                changed = True
        return changed

    def _rewrite(self, entry: dict[str, Any], data: bytes) -> bytes:
        dec = entry.get("decoded") or {}
        method = dec.get("method")
        if method not in REQUEST_TYPES or "request_header" not in dec or not dec["request_header"]:
            return data
        frames = codec.FrameDecoder().feed(data)
        if len(frames) != 1:
            return data
        serial, payload = frames[0]
        try:
            req = wire.decode_request(payload)
            msg = REQUEST_TYPES[method].FromString(req.body)
        except Exception:  # a deliberately broken envelope/body: send it as recorded
            return data
        sent_at = int(self.data["capture"]["t0_epoch_ms"] + entry["t_ms"])
        if not self._substitute(msg, sent_at):
            return data
        return codec.encode_request(
            serial,
            req.service_type,
            req.method,
            msg.SerializeToString(),
            timeout_ms=req.timeout,
            protocol_ver=req.protocol_ver,
        )

    # ---- main loop

    def run(self) -> list[Outcome]:
        frames = self.data["frames"]
        broken_last: set[int] = set()
        try:
            for step in _steps(frames):
                if step.conn_id in broken_last:
                    # the server must see the next write in a separate TCP read, as it did in the capture
                    # (the raw client waited seconds); a bad frame poisons only the read it arrived in
                    time.sleep(0.3)
                    broken_last.discard(step.conn_id)
                if any("request_body" not in (f.get("decoded") or {}) for f in step.frames):
                    broken_last.add(step.conn_id)
                data = step.data
                if len(step.frames) == 1:
                    data = self._rewrite(step.frames[0], data)
                    if self._needs_balance(step.frames[0]):
                        self.on_loop(self.cluster.server.master.balance_round)
                self.conn(step.conn_id).send(data)
                if "first 10 bytes" in step.frames[0].get("note", ""):
                    time.sleep(0.2)  # the real client paused 1 s between the two halves
                for entry in step.frames:
                    self._check_answer(entry)
            self._final_drain()
        finally:
            for c in self.conns.values():
                c.close()
        return self.outcomes

    def _needs_balance(self, entry: dict[str, Any]) -> bool:
        dec = entry.get("decoded") or {}
        if dec.get("method") != 5:
            return False
        q = self.expected.get((entry["conn_id"], entry["serial"]))
        return bool(q) and "event" in (q[0].get("decoded", {}).get("message") or {})

    def _check_answer(self, entry: dict[str, Any]) -> None:
        dec = entry.get("decoded") or {}
        if "request_body" not in dec:
            return  # a broken or partial write: never answered by itself (checked by the drain)
        conn_id, serial = entry["conn_id"], entry["serial"]
        n = self.seen.get((conn_id, serial), 0)
        self.seen[(conn_id, serial)] = n + 1
        key = (self.name, conn_id, serial)
        out = Outcome(key, entry.get("case", ""), dec.get("method"))
        self.outcomes.append(out)
        q = self.expected.get((conn_id, serial))
        recorded = q.popleft() if q else None
        conn = self.conn(conn_id)
        if key in KNOWN_DIFFERENCES:
            out.skipped = KNOWN_DIFFERENCES[key]
            conn.wait(serial, timeout=1.0)  # consume a possible answer either way
            return
        if recorded is None:
            # the real server did not answer; any answer of ours shows up in the final drain
            return
        payload = conn.wait(serial)
        if payload is None:
            out.problems.append("no answer (the real server answered)")
            return
        out.problems.extend(self.compare(recorded["decoded"], payload, dec.get("method")))

    def _final_drain(self) -> None:
        closed = drain_all(self.conns)
        for conn_id, conn in self.conns.items():
            if conn_id in closed:
                self.outcomes.append(
                    Outcome((self.name, conn_id, -1), "drain", None, ["server closed a connection"])
                )
                continue
            extra = conn.unexpected()
            if extra:
                self.outcomes.append(
                    Outcome(
                        (self.name, conn_id, -1),
                        "drain",
                        None,
                        [f"answers the real server never sent: {extra}"],
                    )
                )

    # ---- comparison

    def compare(self, recorded: dict[str, Any], payload: bytes, method: int | None) -> list[str]:
        resp = codec.decode_response(payload)
        rh = recorded.get("response_header", {})
        problems: list[str] = []
        want_status = rh.get("status")
        if STATUS_NAMES.get(resp.status) != want_status:
            return [
                f"status {STATUS_NAMES.get(resp.status)} != {want_status} ({resp.exception_name}: {resp.message})"
            ]
        want_pv = rh.get("protocolVer")
        got_pv = resp.protocol_ver if resp.protocol_ver >= 0 else None
        if want_pv != got_pv:
            problems.append(f"header protocolVer {got_pv} != {want_pv}")
        if resp.status != 0:
            exc = recorded.get("rsp_exception_body", {})
            if resp.exception_name != exc.get("exceptionName"):
                problems.append(f"exceptionName {resp.exception_name!r} != {exc.get('exceptionName')!r}")
            if resp.message != exc.get("stackTrace", ""):
                problems.append(f"stackTrace {resp.message!r} != {exc.get('stackTrace')!r}")
            return problems
        if resp.method != recorded.get("rsp_response_body", {}).get("method", method):
            problems.append(f"method {resp.method}")
        cls = response_class(resp.method)
        ours = _to_dict(cls.FromString(resp.body))
        want = recorded.get("message") or {}
        problems.extend(self._cmp_obj("", want, ours))
        return problems

    def _cmp_obj(self, path: str, want: dict[str, Any], got: dict[str, Any]) -> list[str]:
        problems = []
        wk = {k for k in want if not k.startswith("_")}
        gk = set(got)
        if wk != gk:
            problems.append(f"{path or '<body>'} fields: missing {sorted(wk - gk)}, extra {sorted(gk - wk)}")
        for k in sorted(wk & gk):
            problems.extend(self._cmp_value(f"{path}.{k}" if path else k, k, want[k], got[k]))
        return problems

    def _cmp_value(self, path: str, name: str, want: Any, got: Any) -> list[str]:
        if isinstance(want, dict) and "len" in want and "hex_prefix" in want:  # bytes
            return [] if got == {"len": want["len"]} else [f"{path}: {got} != len {want['len']}"]
        if isinstance(want, dict):
            if not isinstance(got, dict):
                return [f"{path}: not a message"]
            return self._cmp_obj(path, want, got)
        if isinstance(want, list):
            if not isinstance(got, list):
                return [f"{path}: not repeated"]
            if len(want) != len(got):
                return [f"{path}: {len(got)} items != {len(want)}"]
            if want and isinstance(want[0], dict):
                if name == "messages":
                    return []  # message payloads: count compared; content is the codec's business
                return [p for w, g in zip(want, got, strict=True) for p in self._cmp_obj(path, w, g)]
            return self._cmp_strings(path, name, want, got)
        if isinstance(want, bool) or isinstance(got, bool):
            return [] if want == got else [f"{path}: {got!r} != {want!r}"]
        if isinstance(want, int):
            if name in STATE_INTS:
                if name in ECHOED_IDS and want > 0 and got > 0:
                    self.ids.setdefault(name, {})[want] = got
                if name == "rebalanceId" and want > 0:
                    prev = self.rebalance_ids.setdefault(want, got)
                    if prev != got:
                        return [f"{path}: rebalanceId {got} but recorded id {want} mapped to {prev} before"]
                if (want < 0 or got < 0) and want != got:
                    return [f"{path}: {got} != {want}"]
                if name in EXACT_OFFSETS and want != got:
                    return [f"{path}: offset {got} != {want}"]
                return []
            return [] if want == got else [f"{path}: {got} != {want}"]
        if isinstance(want, str):
            return self._cmp_strings(path, name, [want], [got])
        return [] if want == got else [f"{path}: {got!r} != {want!r}"]

    def _cmp_strings(self, path: str, name: str, want: list[str], got: list[str]) -> list[str]:
        ours = [self._normalise(name, s) for s in got]
        if name == "errMsg" and all(re.fullmatch(r"-?\d+", w) for w in want):
            ok = all(re.fullmatch(r"-?\d+", g) for g in ours)  # send answers: the message id in decimal
            return [] if ok else [f"{path}: {ours} is not a message id"]
        if name == "subscribeInfo":
            # partition choice is ours (deterministic) where the real master picks at random
            mask = [re.sub(r":\d+$", ":N", s) for s in want]
            return (
                []
                if sorted(mask) == sorted(re.sub(r":\d+$", ":N", s) for s in ours)
                else [f"{path}: {ours} != {want}"]
            )
        return [] if sorted(want) == sorted(ours) else [f"{path}: {ours} != {want}"]

    def _normalise(self, name: str, text: str) -> str:
        """Map this cluster's broker port to the real 8123 (and its blank default form in broker lists)."""
        text = re.sub(rf":{self.broker_port}(?=$|#)", f":{REAL_BROKER_PORT}", text)
        if name in ("brokerInfos", "brokerConfigList"):
            text = re.sub(rf":{REAL_BROKER_PORT}$", ": ", text)
        return text


def _to_dict(msg: Message) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for fd, value in msg.ListFields():
        if is_repeated(fd):
            if fd.type == fd.TYPE_MESSAGE:
                out[fd.name] = [_to_dict(v) for v in value]
            elif fd.type == fd.TYPE_BYTES:
                out[fd.name] = [{"len": len(v)} for v in value]
            else:
                out[fd.name] = list(value)
        elif fd.type == fd.TYPE_MESSAGE:
            out[fd.name] = _to_dict(value)
        elif fd.type == fd.TYPE_BYTES:
            out[fd.name] = {"len": len(value)}
        else:
            out[fd.name] = value
    return out


# ----------------------------------------------------------------------------------------------------
# fixtures and tests


#: cap_err held 30 index entries from earlier, uncaptured runs of the raw s6 scripts (s6a's first send
#: got appendOffset 840). Their partitions (and the sizes of partition 0's) follow from s6c's reads of
#: cap_err:0, which the real broker served from its files with the halving read (Broker._read):
#: 0..476 held six partition-0 messages of 16, 13, 1, 14, 14, 14 bytes, 28..476 five (the same minus the
#: first), 476..700 two (16, 13), 700..812 one (1) and 812 (entry 29) none; entries 22..29 are one s6a
#: run (p0 16, p0 13, p1, p1, p0 1, p2, p2, p2) and 0..10 an s6a run plus s6c's three seeds. The other
#: entries are on partitions 1 and 2; their sizes are unknown and do not matter to any compared field.
#: The separate store of partition id 10000 held two entries (s6a's send there got appendOffset 56).
CAP_ERR_PRELOAD: list[tuple[int, int]] = (
    [(0, 16), (0, 13), (1, 1), (1, 1), (0, 1), (2, 20), (2, 18), (2, 14), (0, 14), (0, 14), (0, 14)]
    + [(1 + i % 2, 1) for i in range(11)]
    + [(0, 16), (0, 13), (1, 1), (1, 1), (0, 1), (2, 20), (2, 18), (2, 14)]
    + [(10000, 1), (10000, 1)]
)

#: The real broker keeps fresh messages in a memory cache and its flush timer (memCacheFlushIntvl
#: 20 s) moves them into the files, where reads behave differently (server/broker/__init__.py,
#: ``_read``). The replay runs with that timer off (``cache_flush_interval_ms`` 1 h) and flushes the caches
#: where the capture timeline shows the real timer had run: file -> topics flushed before it starts.
TIMER_FLUSHES: dict[str, tuple[str, ...]] = {
    # s1 wrote cap_main 92 s before s2 started; s2 (and s5, later) read it from the files
    "s2_consumer_pull": ("cap_main",),
}


def _preload_cap_err(address: str) -> None:
    """Write CAP_ERR_PRELOAD to cap_err (its memory cache is flushed by the fixture afterwards)."""
    conn = Conn(address)
    try:
        for i, (part, size) in enumerate(CAP_ERR_PRELOAD):
            conn.send(
                codec.encode_send_request(
                    i + 1, "replay-preload", "cap_err", part, b"p" * size, 0, 2130706433, -2
                )
            )
            payload = conn.wait(i + 1)
            assert payload is not None, "preload send not answered"
            resp = codec.decode_response(payload)
            assert resp.status == 0 and codec.decode_send_response(resp.body).success
    finally:
        conn.close()


def _flush_caches(cluster: Any, topics: tuple[str, ...]) -> None:
    async def flush() -> None:
        for topic in topics:
            cluster.server.stores.flush_caches(topic)

    asyncio.run_coroutine_threadsafe(flush(), cluster.loop).result(30)


@pytest.fixture(scope="module")
def replay_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Outcome]]:
    from tubemq.server import EmbeddedCluster

    results: dict[str, list[Outcome]] = {}
    ids: dict[str, dict[int, int]] = {}
    data_dir = tmp_path_factory.mktemp("capture-replay")
    with EmbeddedCluster(
        data_dir=data_dir, balance_period_ms=3_600_000, first_balance_delay_ms=-1, flush_interval_ms=3_600_000, cache_flush_interval_ms=3_600_000
    ) as cluster:
        for name, parts, stores, size in TOPICS:
            cluster.create_topic(name, parts, stores, size)
        _preload_cap_err(cluster.broker_address)
        _flush_caches(cluster, ("cap_err",))
        for name in ORDER:
            _flush_caches(cluster, TIMER_FLUSHES.get(name, ()))
            data = load_capture(name)
            try:
                results[name] = Replayer(name, data, cluster, ids).run()
            except Exception as exc:  # keep replaying the other files; this one fails its test
                results[name] = [Outcome((name, -1, -1), "replay", None, [f"replay aborted: {exc!r}"])]
    return results


@pytest.mark.parametrize("name", ORDER)
def test_replay_matches_real_server(replay_results: dict[str, list[Outcome]], name: str) -> None:
    outcomes = replay_results[name]
    assert outcomes, "nothing replayed"
    bad = [o for o in outcomes if o.problems]
    report = "\n".join(f"{o.key} m{o.method} {o.case}: {'; '.join(o.problems)}" for o in bad)
    assert not bad, f"{len(bad)} of {len(outcomes)} answers differ from the real server:\n{report}"


def test_replay_covers_every_request(replay_results: dict[str, list[Outcome]]) -> None:
    """Every parsed client request of every file was replayed; skips are the documented ones only."""
    for name in ORDER:
        data = load_capture(name)
        requests = [
            f
            for f in data["frames"]
            if f["direction"] in ("c2m", "c2b") and "request_body" in (f.get("decoded") or {})
        ]
        outcomes = [o for o in replay_results[name] if o.case != "drain"]
        assert len(outcomes) == len(requests), name
        for o in outcomes:
            if o.skipped:
                assert o.key in KNOWN_DIFFERENCES
