"""A consumer's per-answer client path on one large getMessage answer, in a fresh process: CPU and page faults.

Builds one getMessage answer frame as a broker sends it (``--messages`` messages of ``--size`` bytes, ~0.5 MB
by default: what the embedded server answers a consumer of 1 KiB messages), then, ``--frames`` times: feeds
it to one ``FrameDecoder`` cut into ``--reads`` reads (from one reused read buffer, as the connection does),
unwraps the ``RspResponseBody`` and decodes the messages, keeping the last ``--held`` answers alive (one per
fetch in flight). Prints microseconds of CPU and minor page faults per frame for three stages: ``feed``
(frame decoder only), ``+unwrap`` and ``+decode`` (the whole path), each in a fresh child process, on a
thread other than the main one (as the consumer's event loop).

Why a fresh process: the cost of a large allocation depends on the process's malloc state (glibc serves
one above its dynamic mmap threshold with a fresh mmap, faulted in page by page and unmapped on free), so
a benchmark inside a long-lived test process can miss what a consumer process pays.

Usage: python bench/frame_path.py [--messages 470] [--size 1024] [--reads 3] [--frames 300] [--held 3]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

from tubemq import codec
from tubemq.net.connection import unwrap_response


def answer_frame(count: int, size: int) -> bytes:
    """A getMessage answer frame: RspResponseBody around GetMessageResponseB2C with ``count`` messages."""
    from tubemq.codec import python as _codec_py
    from tubemq.protocol import broker_pb

    raws = []
    for i in range(count):
        payload = _codec_py.encode_payload(os.urandom(size), None)
        raws.append(_codec_py.encode_transfered_message(3520836758341632001 + i, _codec_py.crc32(payload),
                                                        payload, 0))
    head = broker_pb.GetMessageResponseB2C(
        success=True, errCode=200, errMsg="OK!", currOffset=280, minLimitTime=0, escFlowCtrl=False,
        currDataDlt=0, requireSlow=False, maxOffset=280 + 28 * count,
    ).SerializeToString()
    body = head + _codec_py.wrap_repeated(4, raws)
    return _codec_py.encode_response(1, int(_codec_py.Method.BROKER_CONSUMER_GET_MESSAGE), body)


def measure(path: str, reads: int, frames: int, held: int, stage: str) -> tuple[float, float]:
    """(CPU us per frame, minor faults per frame) over ``frames`` answers, after a warm-up.

    The answers are read from ``path`` straight into buffers that stay alive (no large temporary is
    freed before the measurement: freeing one would raise glibc's mmap threshold and change the result).
    """
    with open(path, "rb", buffering=0) as f:
        sizes = [int(x) for x in f.readline().split()]
        stream = bytearray(sum(sizes))
        f.readinto(stream)
    answers, pos = [], 0
    for n in sizes:
        answers.append(memoryview(stream)[pos:pos + n])
        pos += n
    partition = codec.Partition(1, "127.0.0.1", 8123, "demo", 0)
    dec = codec.FrameDecoder()
    step = max(len(a) for a in answers) // reads + 1
    rbuf = bytearray(step)  # the connection's read buffer, reused for every read
    view = memoryview(rbuf)
    alive: list[Any] = [None] * held

    def one(i: int) -> None:
        frame = answers[i % len(answers)]
        for start in range(0, len(frame), step):
            n = min(step, len(frame) - start)
            view[:n] = frame[start:start + n]
            for _, payload in dec.feed(view[:n]):
                out: Any = payload
                if stage != "feed":
                    out = unwrap_response(payload)
                if stage == "+decode":
                    out = codec.decode_get_message_response(out, "demo", partition, True)
                alive[i % held] = out

    for i in range(held + 5):
        one(i)
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    c0 = time.process_time()
    for i in range(frames):
        one(i)
    cpu = time.process_time() - c0
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0
    return cpu / frames * 1e6, faults / frames


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=470, help="messages in the largest answer (default 470)")
    ap.add_argument("--size", type=int, default=1024, help="message size (default 1024)")
    ap.add_argument("--reads", type=int, default=3, help="reads each frame arrives in (default 3)")
    ap.add_argument("--frames", type=int, default=300, help="frames measured per stage (default 300)")
    ap.add_argument("--held", type=int, default=3, help="answers kept alive, as fetches in flight (default 3)")
    ap.add_argument("--stages", default="feed,+unwrap,+decode", help="subset of feed,+unwrap,+decode")
    ap.add_argument("--measure", default=None, help=argparse.SUPPRESS)  # internal: the child's answers file
    args = ap.parse_args()
    if args.measure:
        # on a thread of its own, like the consumer's event-loop thread: glibc gives it its own malloc
        # arena, which trims differently from the main thread's (the figures differ a lot)
        result: dict[str, float] = {}

        def work() -> None:
            result["us"], result["faults"] = measure(args.measure, args.reads, args.frames, args.held,
                                                     args.stages)

        worker = threading.Thread(target=work, name="loop")
        worker.start()
        worker.join()
        print(json.dumps(result))
        return
    # three answers of slightly different sizes, as a consumer gets: written to a file, each stage
    # measured in a fresh child process that reads them without freeing a large temporary
    frames = [answer_frame(args.messages - k, args.size) for k in (0, 5, 11)]
    with tempfile.NamedTemporaryFile(prefix="tubemq-frames-", delete=False) as f:
        f.write(" ".join(str(len(fr)) for fr in frames).encode() + b"\n" + b"".join(frames))
    try:
        print(f"# codec {codec.implementation}; answers of {', '.join(str(len(fr)) for fr in frames)} bytes"
              f" ({int.from_bytes(frames[0][8:12], 'big')} blocks) in {args.reads} reads, {args.held} held;"
              f" load average {os.getloadavg()[0]:.1f}", flush=True)
        for stage in args.stages.split(","):
            out = subprocess.run([sys.executable, __file__, "--measure", f.name, "--stages", stage,
                                  "--reads", str(args.reads), "--frames", str(args.frames), "--held", str(args.held)],
                                 capture_output=True, text=True, check=True, timeout=600)
            r = json.loads(out.stdout)
            print(f"{stage:>8}: {r['us']:8.1f} us CPU per frame, {r['faults']:6.1f} page faults per frame", flush=True)
    finally:
        os.unlink(f.name)


if __name__ == "__main__":
    main()
