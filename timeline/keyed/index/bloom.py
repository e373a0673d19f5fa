"""A bloom filter over record keys (Hudi's per-file bloom index), as compact bytes.

Two 64-bit hash words per key; bits in a numpy array, so adding and probing a batch of keys
is a few vector operations. Two layouts of the bits:
- **blocked** (`BLOCKED_WORDS`): all of a key's bits in one 64-bit word, the word picked by
  the first hash word, the bits by 6-bit fields of the second. A builder holds the filter
  packed, a bit per bit, and a key sets and probes one word. It takes more bits for a
  false-positive rate than the plain layout (1.25x at 0.01, 3.5x at 1e-6), so it is built
  where that costs at most `BLOCKED_MAX_COST` of a plain filter's bits: copy-on-write's
  0.01, not merge-on-read's 1e-6.
- **plain** (`HASH_WORDS`): double hashing over the whole filter. Its builder holds a byte
  per bit (setting bits of a packed array one by one cost 7x as much): a 2.5M-key file's
  filter took 24 MiB while it was rewritten, on each writing thread.

Keys are hashed straight from their Arrow buffers (`HASH_WORDS`): a rewritten file's millions
of keys never become Python strings. The hash is part of the stored format (a filter is probed
by later writers, possibly other versions), so a filter records which one built it; filters
written before the vectorized hash carry no name and are probed with `HASH_BLAKE2B`.
"""

from __future__ import annotations

import base64
import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: Bits per filter at most (4 MiB); a file with more keys gets a filter with a higher
#: false-positive rate (its key range still prunes).
MAX_BITS = 8 * 4 * 1024 * 1024
#: Filters up to this many bytes stay inline in the commit metadata; bigger ones go into a
#: sidecar object next to their data file (referenced with its checksum), so commit entries
#: stay small for every reader of the timeline.
INLINE_MAX_BYTES = 4096

#: The UTF-8 bytes of a key as little-endian 64-bit words (zero-padded), folded with murmur3's
#: 64-bit finalizer, seeded by the key's length so "a" and "a\0" differ.
HASH_WORDS = "words64"
#: One blake2b digest per key (filters written before `HASH_WORDS`).
HASH_BLAKE2B = "blake2b"
#: `HASH_WORDS`'s hash, the blocked layout (the module's text): bits of a key in one word.
BLOCKED_WORDS = "words64-block64"
#: The blocked layout is built where it needs at most this many times a plain filter's bits
#: for the same false-positive rate.
BLOCKED_MAX_COST = 1.3
#: Bits a key sets in its word at most: 6-bit fields of the second hash word above its
#: lowest bit (always set, for double hashing).
BLOCKED_MAX_HASHES = 10

#: Record keys as the writers hold them: an Arrow string column, or Python strings.
Keys: TypeAlias = "pa.Array | pa.ChunkedArray | Sequence[str]"

_M1 = np.uint64(0xFF51AFD7ED558CCD)
_M2 = np.uint64(0xC4CEB9FE1A85EC53)
_SEED1 = np.uint64(0x9E3779B97F4A7C15)
_SEED2 = np.uint64(0xC2B2AE3D27D4EB4F)
_S33 = np.uint64(33)
#: The mask keeping a word's low i bytes, for i in 0..8 (a key's last word is cut at its end).
_LOW_BYTES = np.array([(1 << (8 * i)) - 1 for i in range(8)] + [(1 << 64) - 1], dtype=np.uint64)
#: Hash positions computed at once while building a `HASH_BLAKE2B` filter (bounds that
#: matrix to 16 MiB; `HASH_WORDS` positions are made one hash at a time, with no matrix).
_CHUNK_CELLS = 1 << 21
#: Keys a builder hashes at once: their hashes, the hashing's scratch and their bit
#: positions (one hash at a time) are what adding keys holds beside the filter's bits, so a
#: rewrite adding a row group of keys (131,072 by default) holds a tenth of it. At fpp 0.01
#: a row group's keys made a 7 MiB matrix and about as much again in hashes, per file being
#: rewritten.
ADD_KEYS = 16_384


def _fmix(h: np.ndarray, tmp: np.ndarray) -> np.ndarray:
    """murmur3's 64-bit finalizer applied to `h` in place (`tmp`: scratch of its length):
    no temporary array per step, which for a part of `ADD_KEYS` keys cost about as much as
    the arithmetic."""
    with np.errstate(over="ignore"):
        np.right_shift(h, _S33, out=tmp)
        h ^= tmp
        h *= _M1
        np.right_shift(h, _S33, out=tmp)
        h ^= tmp
        h *= _M2
        np.right_shift(h, _S33, out=tmp)
        h ^= tmp
    return h


def _binary(keys: Keys) -> pa.Array:
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    elif not isinstance(keys, pa.Array):
        keys = pa.array(list(keys), pa.string())
    if keys.null_count:
        raise ValueError("a record key is null")
    return pc.cast(keys, pa.large_binary())


def _words_hash(keys: Keys) -> tuple[np.ndarray, np.ndarray]:
    arr = _binary(keys)
    n = len(arr)
    if n == 0:
        empty = np.zeros(0, dtype=np.uint64)
        return empty, empty
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64)[arr.offset : arr.offset + n + 1]
    data_buf = arr.buffers()[2]
    raw = np.frombuffer(data_buf, dtype=np.uint8) if data_buf else np.zeros(0, np.uint8)
    # Only these keys' bytes: a slice's data buffer is its whole parent's (a part of
    # `ADD_KEYS` keys of a 2.5M-key column copied all 17 MiB of it, for every part).
    first = int(offsets[0])
    padded = np.concatenate([raw[first : offsets[-1]], np.zeros(8, np.uint8)])  # the last
    # word reads past the end. Element i is the 8 bytes starting at byte i (unaligned
    # loads): one gather per word.
    words = np.ndarray((len(padded) - 7,), dtype="<u8", buffer=padded, strides=(1,))
    starts = offsets[:-1] - first
    lengths = np.diff(offsets)
    tmp = np.empty(n, dtype=np.uint64)
    with np.errstate(over="ignore"):
        out = lengths.astype(np.uint64) * _M1
        if lengths.min() > 0 and lengths.max() <= 8:
            # Every key one word (an integer key's text up to 8 digits): no key to follow.
            word = words[starts]
            word &= _LOW_BYTES[lengths]  # zero the bytes past the key's end
            out ^= word
            _fmix(out, tmp)
        else:
            j = 0
            active = np.flatnonzero(lengths > 0)
            while len(active):
                rem = lengths[active] - 8 * j
                word = words[starts[active] + 8 * j]
                word &= _LOW_BYTES[np.minimum(rem, 8)]
                # Only a key's own words: the hash must not depend on its neighbours' lengths.
                word ^= out[active]
                out[active] = _fmix(word, tmp[: len(word)])
                j += 1
                active = active[rem > 8]
        h1 = _fmix(out ^ _SEED1, tmp)
        out ^= _SEED2
        h2 = _fmix(out, np.empty(n, dtype=np.uint64))
        h2 |= np.uint64(1)
    return h1, h2


def _blake2b_hash(keys: Keys) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(keys, (pa.Array, pa.ChunkedArray)):
        keys = [str(k) for k in keys.to_pylist()]
    digests = b"".join(hashlib.blake2b(k.encode(), digest_size=16).digest() for k in keys)
    words = np.frombuffer(digests, dtype="<u8").reshape(-1, 2) if keys else np.zeros((0, 2), "<u8")
    return words[:, 0], words[:, 1] | np.uint64(1)


_HASHES = MappingProxyType(
    {HASH_WORDS: _words_hash, BLOCKED_WORDS: _words_hash, HASH_BLAKE2B: _blake2b_hash}
)


def key_hashes(keys: Keys, hash_name: str = HASH_WORDS) -> tuple[np.ndarray, np.ndarray]:
    """The two hash words of each key (double hashing) under the named hash."""
    try:
        fn = _HASHES[hash_name]
    except KeyError:
        raise ValueError(
            f"bloom filter hash {hash_name!r} is not known to this version (known: "
            f"{', '.join(sorted(_HASHES))}); upgrade flowledger to read this table"
        ) from None
    return fn(keys)


@dataclass(frozen=True)
class BloomFilter:
    bits: bytes  # little-endian bit order (numpy packbits, bitorder="little")
    num_bits: int
    num_hashes: int
    hash_name: str = HASH_BLAKE2B

    @staticmethod
    def build(keys: Keys, fpp: float = 0.01) -> BloomFilter:
        builder = BloomBuilder(len(keys), fpp)
        builder.add(keys)
        return builder.finish()

    @staticmethod
    def build_sized(keys: Keys, num_bits: int, num_hashes: int, hash_name: str) -> BloomFilter:
        """The filter of `keys` with a given size and hash (a filter rebuilt as it was
        written: `build` chose them from its key count and false-positive rate)."""
        if hash_name == BLOCKED_WORDS:
            words = np.zeros(num_bits // 64, dtype=np.uint64)
            if len(keys):
                _set_word_bits(words, *key_hashes(keys, hash_name), num_hashes)
            return BloomFilter(_word_bytes(words), num_bits, num_hashes, hash_name)
        array = np.zeros(num_bits, dtype=bool)
        if len(keys):
            _set_bits(array, *key_hashes(keys, hash_name), num_hashes, hash_name)
        return BloomFilter(
            np.packbits(array, bitorder="little").tobytes(), num_bits, num_hashes, hash_name
        )

    @property
    def hashed_with(self) -> str:
        """The hash its keys are hashed with (both layouts of `HASH_WORDS` hash alike, so a
        batch probing both is hashed once)."""
        return HASH_WORDS if self.hash_name == BLOCKED_WORDS else self.hash_name

    def might_contain(self, keys: Keys) -> np.ndarray:
        """One bool per key: False = certainly absent."""
        if not len(keys):
            return np.zeros(0, dtype=bool)
        return self.might_contain_hashed(*key_hashes(keys, self.hash_name))

    def might_contain_hashed(self, h1: np.ndarray, h2: np.ndarray) -> np.ndarray:
        """`might_contain` for keys hashed once by `key_hashes` with this filter's
        `hash_name` (an index probing many files with one batch hashes it once)."""
        if not len(h1):
            return np.zeros(0, dtype=bool)
        if self.hash_name == BLOCKED_WORDS:
            words = np.frombuffer(self.bits, dtype="<u8")
            at, mask = _word_masks(h1, h2, len(words), self.num_hashes)
            found: np.ndarray = (words[at] & mask) == mask
            return found
        # The packed bytes are probed in place: unpacking a filter of a few MiB to test a
        # few thousand keys would cost more than the test.
        packed = np.frombuffer(self.bits, dtype=np.uint8)
        pos = _hashed_positions(h1, h2, self.num_bits, self.num_hashes, self.hash_name)
        bit = (packed[pos >> 3] >> (pos & 7).astype(np.uint8)) & np.uint8(1)
        result: np.ndarray = bit.all(axis=1)
        return result

    def to_json(self) -> dict[str, object]:
        return {
            "bits": base64.b64encode(self.bits).decode(),
            "num_bits": self.num_bits,
            "num_hashes": self.num_hashes,
            "hash": self.hash_name,
        }

    @staticmethod
    def from_json(d: dict[str, object]) -> BloomFilter:
        return BloomFilter(
            base64.b64decode(str(d["bits"])),
            int(str(d["num_bits"])),
            int(str(d["num_hashes"])),
            str(d.get("hash", HASH_BLAKE2B)),
        )


class BloomBuilder:
    """A filter sized for `expected` keys, filled a part of the keys at a time (a rewrite
    adds each row group's keys as it encodes them, instead of holding the file's keys and
    their hashes): given the same keys it is the filter `BloomFilter.build` makes. Blocked
    where that layout costs little (`blocked_size`), else plain; `plain`: plain whatever
    the rate (what a blocked filter is measured against)."""

    def __init__(self, expected: int, fpp: float = 0.01, *, plain: bool = False) -> None:
        n = max(expected, 1)
        blocked = None if plain else blocked_size(fpp)
        self._words: np.ndarray | None = None
        self._array: np.ndarray | None = None
        if blocked is not None:
            per_key, self.num_hashes = blocked
            words = max(1, min(MAX_BITS // 64, math.ceil(n * per_key / 64)))
            self.num_bits, self.hash_name = 64 * words, BLOCKED_WORDS
            self._words = np.zeros(words, dtype=np.uint64)
            return
        m = math.ceil(-n * math.log(fpp) / (math.log(2) ** 2))
        self.num_bits = max(64, min(MAX_BITS, m))
        self.num_hashes = min(16, max(1, round(self.num_bits / n * math.log(2))))
        self.hash_name = HASH_WORDS
        self._array = np.zeros(self.num_bits, dtype=bool)

    def add(self, keys: Keys) -> None:
        """Set the bits of `keys`, `ADD_KEYS` of them hashed at a time."""
        for i in range(0, len(keys), ADD_KEYS):
            h1, h2 = key_hashes(keys[i : i + ADD_KEYS])
            if self._words is not None:
                _set_word_bits(self._words, h1, h2, self.num_hashes)
            else:
                assert self._array is not None
                _set_bits(self._array, h1, h2, self.num_hashes, HASH_WORDS)

    def finish(self) -> BloomFilter:
        if self._words is not None:
            bits = _word_bytes(self._words)
        else:
            assert self._array is not None
            bits = np.packbits(self._array, bitorder="little").tobytes()
        return BloomFilter(bits, self.num_bits, self.num_hashes, self.hash_name)


#: (bits per key, bits each key sets, false-positive rate) of blocked filters, the best
#: number of bits for each size: an absent key probes a word holding a Poisson number of
#: keys (64 / bits per key on average), each of which set its bits at random (the test
#: tests/timeline/keyed/test_bloom.py computes the rates again).
BLOCKED_RATES = (
    (2.0, 1, 0.3935), (2.5, 2, 0.3052), (3.0, 2, 0.2397), (3.5, 2, 0.193),
    (4.0, 3, 0.1545), (4.5, 3, 0.1232), (5.0, 3, 0.09993), (5.5, 3, 0.08228),
    (6.0, 4, 0.06736), (6.5, 4, 0.05527), (7.0, 4, 0.04588), (7.5, 4, 0.03849),
    (8.0, 4, 0.03259), (8.5, 5, 0.02751), (9.0, 5, 0.02328), (9.5, 5, 0.01985),
    (10.0, 5, 0.01705), (10.5, 5, 0.01474), (11.0, 5, 0.01282), (11.5, 5, 0.01122),
    (12.0, 6, 0.009773), (12.5, 6, 0.008547), (13.0, 6, 0.007512), (13.5, 6, 0.006633),
    (14.0, 6, 0.005882), (14.5, 6, 0.005237), (15.0, 6, 0.00468), (15.5, 6, 0.004198),
    (16.0, 6, 0.003778),
)  # fmt: skip


def blocked_size(fpp: float) -> tuple[float, int] | None:
    """(bits per key, bits each key sets) of the smallest blocked filter (`BLOCKED_RATES`)
    whose false-positive rate is at most `fpp`, or None when it would take more than
    `BLOCKED_MAX_COST` times the bits of a plain filter of that rate."""
    plain = -math.log(fpp) / math.log(2) ** 2
    for per_key, k, rate in BLOCKED_RATES:
        if rate <= fpp:
            return (per_key, k) if per_key <= plain * BLOCKED_MAX_COST else None
    return None


def _word_masks(
    h1: np.ndarray, h2: np.ndarray, words: int, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """Each key's word of a blocked filter of `words` words (Lemire's fast range over the
    first hash word's high 32 bits) and the mask of the `k` bits it sets there."""
    mask = np.zeros(len(h2), dtype=np.uint64)
    bit = np.empty_like(h2)
    with np.errstate(over="ignore"):
        at = ((h1 >> np.uint64(32)) * np.uint64(words)) >> np.uint64(32)
        for i in range(k):
            np.right_shift(h2, np.uint64(1 + 6 * i), out=bit)
            bit &= np.uint64(63)
            np.left_shift(np.uint64(1), bit, out=bit)
            mask |= bit
    return at.astype(np.intp), mask


def _set_word_bits(words: np.ndarray, h1: np.ndarray, h2: np.ndarray, k: int) -> None:
    at, mask = _word_masks(h1, h2, len(words), k)
    # Where two keys share a word, the fancy-indexed OR keeps only the last key's mask: the
    # keys whose bits are missing then are ORed in by `bitwise_or.at`, which keeps every
    # key's (used for all of them it took 7x as long: a few hundred keys of 16,384 share).
    words[at] |= mask
    lost = (words[at] & mask) != mask
    if lost.any():
        np.bitwise_or.at(words, at[lost], mask[lost])


def _word_bytes(words: np.ndarray) -> bytes:
    """A blocked filter's words as stored: little-endian, so bit i of the filter is bit
    i % 8 of byte i // 8, as in a plain filter's packed bits."""
    return words.astype("<u8", copy=False).tobytes()


def _hashed_positions(
    h1: np.ndarray, h2: np.ndarray, m: int, k: int, hash_name: str = HASH_WORDS
) -> np.ndarray:
    """The k bit positions of each key. `HASH_WORDS` filters map a position's high 32 bits
    onto [0, m) by multiplication (Lemire's fast range: a third of a modulo's cost; m stays
    below 2**32 because of `MAX_BITS`); `HASH_BLAKE2B` filters were written with a modulo."""
    i = np.arange(k, dtype=np.uint64)
    with np.errstate(over="ignore"):
        combined = h1[:, None] + i[None, :] * h2[:, None]
        if hash_name == HASH_BLAKE2B:
            spread = combined % np.uint64(m)
        else:
            spread = ((combined >> np.uint64(32)) * np.uint64(m)) >> np.uint64(32)
    result: np.ndarray = spread.astype(np.int64)
    return result


def _set_bits(array: np.ndarray, h1: np.ndarray, h2: np.ndarray, k: int, hash_name: str) -> None:
    """Set the k positions of every key in `array` (one bool per bit). `HASH_WORDS`
    positions are made one hash at a time over the keys, as `_hashed_positions` computes
    them (h1 + i * h2 is the previous position's sum plus h2), in two reused vectors: no
    matrix of positions, and about 40 % less time than filling one."""
    if hash_name != HASH_WORDS:
        step = max(1, _CHUNK_CELLS // k)  # positions are k per key: bound the matrix
        for i in range(0, len(h1), step):
            pos = _hashed_positions(h1[i : i + step], h2[i : i + step], len(array), k, hash_name)
            array[pos.ravel()] = True
        return
    m = np.uint64(len(array))
    combined = h1.copy()
    pos = np.empty_like(h1)
    with np.errstate(over="ignore"):
        for i in range(k):
            if i:
                combined += h2
            np.right_shift(combined, np.uint64(32), out=pos)  # Lemire's fast range
            pos *= m
            pos >>= np.uint64(32)
            array[pos.view(np.int64)] = True
