"""InLongMsg v4 decoding is linear in the container size for every attribute layout (issue 22 item 3).

The quadratic case: messages with private attributes (ext bit 0x1) and a common attribute text over the
512-byte cache limit, where the per-message key merge ran again for every message (247 KB with 20,000
messages and 1,000 common keys took 22.7 s). These tests count the work (key merges, characters of merged
keys, Java hash computations) instead of timing it; the timings are printed only.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from types import ModuleType

import pytest

from tubemq import inlongmsg
from tubemq.codec import _inlong_v4 as v4
from tubemq.errors import InLongMsgError


def container(messages: int, common_keys: int, distinct_private: int) -> bytes:
    """A v4 container of ``messages`` 1-byte bodies, each with a private attribute (``distinct_private``
    different texts), and ``common_keys`` common attributes."""
    common = "&".join(f"k{i}=v{i}" for i in range(common_keys))
    privates = [f"p={i % distinct_private}" for i in range(messages)]
    b = inlongmsg.InLongMsgBuilder(4, compress=False)
    b.add_binary(inlongmsg.binary_message([b"x"] * messages, common, group_id=1, stream_id=2,
                                          data_time=1700000000, private_attrs=privates))
    return b.build()


class Work:
    """What a decode did: key merges, characters of merged keys, Java hashes computed."""

    def __init__(self) -> None:
        self.merges = self.chars = self.hashes = 0

    @property
    def total(self) -> int:
        return self.chars + self.hashes


@pytest.fixture
def work(api: ModuleType, monkeypatch: pytest.MonkeyPatch) -> Iterator[Work]:
    """Counts the work of ``tubemq.inlongmsg`` (on the implementation under test), caches emptied."""
    w = Work()
    merge, java_hash = v4._v4_private_key, v4.java_hash

    def counting_merge(private: bytes, common: v4._V4Common) -> str:
        key = merge(private, common)
        w.merges += 1
        w.chars += len(key)
        return key

    def counting_hash(text: str) -> int:
        w.hashes += 1
        return java_hash(text)

    monkeypatch.setattr(v4, "_v4_private_key", counting_merge)
    monkeypatch.setattr(v4, "java_hash", counting_hash)
    for cache in (v4._V4_KEYS, v4._V4_PRIVATE_KEYS, v4._SPREADS):
        cache.clear()
    yield w


def _decode(data: bytes, label: str) -> inlongmsg.InLongMsg:
    t = time.perf_counter()
    msg = inlongmsg.decode(data)
    print(f"{label}: {len(data)} bytes decoded in {time.perf_counter() - t:.3f} s ({inlongmsg._impl.implementation})")
    return msg


def _reference_key(private: str, common_attr: str) -> str:
    """The key as the plain Java HashMap emulation makes it (what the decoder did before, per message)."""
    common = (v4._JavaHashMap.copy_of(v4._guava_split(common_attr)) if common_attr
              else v4._JavaHashMap())
    common.put("dt", "1700000000000")
    common.put("groupId", "1")
    common.put("streamId", "2")
    common.put("cnt", str(20000))
    m = v4._JavaHashMap.copy_of(v4._guava_split(private))
    m.put_all(common.items())
    return m.join()


def test_issue_worst_case_merges_once_per_distinct_private(api: ModuleType, work: Work) -> None:
    data = container(20000, 1000, 4)  # the issue's 247 KB case (private texts repeat, common > 512 B)
    msg = _decode(data, "20,000 messages x 1,000 common keys")
    assert len(msg) == 20000 and len(msg.attrs) == 4
    assert work.merges == 4  # not one per message
    assert work.hashes <= 1004 + 1  # the common keys (+ dt, groupId, streamId, cnt) once, and "p"
    common = "&".join(f"k{i}=v{i}" for i in range(1000))
    assert msg.attrs[1] == _reference_key("p=1", common)
    assert len(msg.bodies(msg.attrs[3])) == 5000


def test_work_grows_linearly_with_the_container(api: ModuleType, work: Work) -> None:
    sizes = []
    for scale in (1, 4):
        before = work.total
        data = container(2500 * scale, 250 * scale, 8)
        assert len(_decode(data, f"x{scale}")) == 2500 * scale
        sizes.append((len(data), work.total - before))
    (n1, w1), (n4, w4) = sizes
    print(f"container x{n4 / n1:.2f}: work {w1} -> {w4} (x{w4 / w1:.2f}; a merge per message would be ~x16)")
    assert w4 / w1 < 1.5 * n4 / n1
    assert w4 <= 8 * n4


def test_distinct_private_attributes_with_short_common(api: ModuleType, work: Work) -> None:
    data = container(20000, 20, 20000)  # every message its own key: the output itself is that large
    msg = _decode(data, "20,000 distinct private attributes x 20 common keys")
    assert len(msg.attrs) == 20000 and work.merges == 20000
    assert work.total <= 64 * len(data)


def test_hostile_expansion_is_refused_in_bounded_work(api: ModuleType, work: Work) -> None:
    data = container(20000, 1000, 20000)  # each distinct private text repeats ~10 KB of common keys
    with pytest.raises(InLongMsgError, match="characters of attribute keys"):
        _decode(data, "20,000 distinct private attributes x 1,000 common keys")
    budget = max(v4._V4_KEY_TEXT_MIN, v4._V4_KEY_TEXT_FACTOR * len(data))
    assert work.chars <= budget + 20000  # stopped at the first merge over the budget
    print(f"refused after {work.merges} merges, {work.chars} characters")


def test_merged_keys_match_the_java_hashmap_emulation(api: ModuleType) -> None:
    rnd = random.Random(22)
    names = [f"k{i}" for i in range(120)] + ["dt", "cnt", "groupId", "streamId", "Aa", "BB", "p"]
    for _ in range(300):
        common_names = rnd.sample(names, rnd.choice([0, 1, 11, 12, 13, 24, 25, 48, 49, 97]))
        common_attr = "&".join(f"{k}=c{rnd.randint(0, 9)}" for k in common_names)
        common = v4._v4_common(common_attr.encode(), 1700000000, 1, 2, 20000, True)
        private = "&".join(f"{k}=q{rnd.randint(0, 9)}" for k in rnd.sample(names + ["x", "y"], rnd.randint(1, 30)))
        v4._V4_PRIVATE_KEYS.clear()
        assert v4._v4_private_key(private.encode(), common) == _reference_key(private, common_attr), (
            private, common_attr)
