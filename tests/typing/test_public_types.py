"""The public API is typed: mypy sees ``tubemq.Producer`` etc. as real classes, not ``Any`` (the lazy
``__getattr__`` of ``tubemq`` / ``tubemq.aio`` used to hide them), so a typo'd method is an error."""

from __future__ import annotations

import re
from collections.abc import Callable

USER_SCRIPT = '''\
import tubemq
import tubemq.aio

p = tubemq.Producer("h:1")
reveal_type(p)
reveal_type(p.send("t", b"x"))
p.sned("t", b"x")
c = tubemq.Consumer("h:1", group="g", topics=["t"])
reveal_type(c)
reveal_type(c.poll())
reveal_type(tubemq.BoundConsumer("h:1", group="g", topics=["t"]))
reveal_type(tubemq.ProducerConfig(master="h:1"))
reveal_type(tubemq.ConsumerConfig(master="h:1", group="g"))
reveal_type(tubemq.ClientConfig(master="h:1"))


async def main() -> None:
    ap = tubemq.aio.Producer("h:1")
    reveal_type(ap)
    reveal_type(await ap.send_and_wait("t", b"x"))
    reveal_type(tubemq.aio.Consumer("h:1", group="g", topics=["t"]))
    reveal_type(tubemq.aio.BoundConsumer("h:1", group="g", topics=["t"]))
    await ap.sned("t", b"x")
'''

EXPECTED = [
    "tubemq.producer.sync.Producer",
    "tubemq.types.SendResult",
    "tubemq.sync.consumer.Consumer",
    "tubemq.types.Batch | None",
    "tubemq.sync.bound.BoundConsumer",
    "tubemq.config.ProducerConfig",
    "tubemq.config.ConsumerConfig",
    "tubemq.config.ClientConfig",
    "tubemq.producer.aio.Producer",
    "tubemq.types.SendResult",
    "tubemq.consumer.aio.Consumer",
    "tubemq.consumer.bound.aio.AsyncBoundConsumer",
]


def test_mypy_sees_the_public_classes(mypy_on: Callable[[str], str]) -> None:
    out = mypy_on(USER_SCRIPT)
    revealed = re.findall(r'Revealed type is "(.*)"', out)
    # a NamedTuple reveals as its tuple form; what matters is the class it falls back to
    revealed = [re.sub(r"^tuple\[.*fallback=([\w.]+)\]$", r"\1", r) for r in revealed]
    assert revealed == EXPECTED, out
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert len(errors) == 2, out
    assert all('has no attribute "sned"' in e for e in errors), out
