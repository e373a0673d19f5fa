"""The bloom filter's bits are a stored format: the same keys must set the same bits under
every version. Digests of filters and hashes as first released pin them, for keys of one
word (an integer key's text), of many words and of no bytes, and for a slice of an array:
plain filters (`HASH_WORDS`, as the builder first made them at 0.01) and blocked ones
(`BLOCKED_WORDS`, what it makes at 0.01 since)."""

from __future__ import annotations

import hashlib

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from timeline.keyed.index.bloom import (
    BLOCKED_WORDS,
    HASH_WORDS,
    BloomBuilder,
    BloomFilter,
    key_hashes,
)

pytestmark = pytest.mark.unit

#: name -> (num_bits, num_hashes, sha256 of the filter's bits, sha256 of both hash words)
PINNED = {
    "ints": (
        639008,
        7,
        "300444c12d3460dc8fcd6a763b92a6ce89b85834e6600e13ac841b214b74cd78",
        "b29e9749e0920771a855ff403da7d2ae34fe76da19ecb6980adda13d99f9f3ae",
    ),
    "mixed": (
        191702,
        7,
        "e7262c1fce461505d79a5f9ea5f016d976a233bfa3c8991f69ab4d02bec4298d",
        "406345c3fbc38cd629b76104bab488631b1b527ee64dc8a7418af3df0d5117d4",
    ),
    "sliced": (
        47926,
        7,
        "c47d455fde5da5fc0d5871097d0e01eac7d7093702563dfc545df068f25f74e1",
        "c029eb4b3e49040e64f20bf5151983fc6dcb7b19013f1ce07c0e449ca14a0cb1",
    ),
}


def _keysets() -> dict[str, pa.Array]:
    rng = np.random.default_rng(7)
    ints = pc.cast(pa.array(np.arange(0, 200_000, 3, dtype=np.int64)), pa.string())
    alphabet = list("abcxyz0189-_é€\x00")
    lengths = rng.integers(0, 41, 20_000)
    mixed = pa.array(["".join(rng.choice(alphabet, int(n))) for n in lengths])
    return {"ints": ints, "mixed": mixed, "sliced": mixed.slice(123, 5000)}


@pytest.mark.parametrize("name", sorted(PINNED))
def test_a_filter_sets_the_bits_it_always_set(name: str) -> None:
    keys = _keysets()[name]
    num_bits, num_hashes = PINNED[name][:2]
    f = BloomFilter.build_sized(keys, num_bits, num_hashes, HASH_WORDS)
    h1, h2 = key_hashes(keys)
    got = (
        f.num_bits,
        f.num_hashes,
        hashlib.sha256(f.bits).hexdigest(),
        hashlib.sha256(h1.tobytes() + h2.tobytes()).hexdigest(),
    )
    assert got == PINNED[name]


#: name -> (num_bits, num_hashes, sha256 of the bits) of `BloomFilter.build(keys)`: blocked.
PINNED_BLOCKED = {
    "ints": (800064, 6, "aa26d83c4b96f2792b0ff0ac97cfe56f79d9eaf53bc1cc75b35da2cdcb319478"),
    "mixed": (240000, 6, "81f4062ffc814985caf74de8dfa97cb88374eb1c9122331c22f44b59accd8c29"),
    "sliced": (60032, 6, "e30db7e5eb57ce5948215779fa06f9bf1815c383e8ff646956f34dcc98de3b83"),
}


@pytest.mark.parametrize("name", sorted(PINNED_BLOCKED))
def test_a_blocked_filter_sets_the_bits_it_always_set(name: str) -> None:
    f = BloomFilter.build(_keysets()[name])
    assert f.hash_name == BLOCKED_WORDS
    assert (f.num_bits, f.num_hashes, hashlib.sha256(f.bits).hexdigest()) == PINNED_BLOCKED[name]


def test_a_blocked_filter_sets_the_bits_its_layout_names() -> None:
    """The layout, key by key in plain integers: the word is the first hash's high 32 bits
    scaled to the word count, its bits the second hash's 6-bit fields from bit 1; filter bit
    i is bit i % 8 of byte i // 8."""
    keys = _keysets()["mixed"].slice(0, 3000)
    f = BloomFilter.build(keys)
    words = f.num_bits // 64
    expected = bytearray(f.num_bits // 8)
    h1, h2 = key_hashes(keys)
    for a, b in zip(h1.tolist(), h2.tolist(), strict=True):
        word = ((a >> 32) * words) >> 32
        for i in range(f.num_hashes):
            bit = 64 * word + ((b >> (1 + 6 * i)) & 63)
            expected[bit // 8] |= 1 << (bit % 8)
    assert f.bits == bytes(expected)


def test_one_word_keys_hash_as_keys_of_several_words_do() -> None:
    # One-word keys take a shorter path; beside longer keys they take the general one.
    short = pc.cast(pa.array(np.arange(9_990, 10_010, dtype=np.int64)), pa.string())
    alone = key_hashes(short)
    mixed = key_hashes(pa.concat_arrays([short, pa.array(["a key longer than a word", ""])]))
    assert np.array_equal(alone[0], mixed[0][: len(short)])
    assert np.array_equal(alone[1], mixed[1][: len(short)])


def test_a_builder_filled_in_parts_is_the_filter_built_at_once() -> None:
    keys = _keysets()["mixed"]
    builder = BloomBuilder(len(keys))
    builder.add(keys.slice(0, 7_000))
    builder.add(keys.slice(7_000))
    assert builder.finish() == BloomFilter.build(keys)
