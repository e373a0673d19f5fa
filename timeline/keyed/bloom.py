"""A bloom filter over record keys (Hudi's per-file bloom index), as compact bytes.

Double hashing over one blake2b digest per key; bits in a numpy array so adding and probing
a batch of keys is a few vector operations after hashing.
"""

from __future__ import annotations

import base64
import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: Bits per filter at most (4 MiB); a file with more keys gets a filter with a higher
#: false-positive rate (its key range still prunes).
MAX_BITS = 8 * 4 * 1024 * 1024
#: Filters up to this many bytes stay inline in the commit metadata; bigger ones go into a
#: sidecar object next to their data file (referenced with its checksum), so commit entries
#: stay small for every reader of the timeline.
INLINE_MAX_BYTES = 4096


def _hashes(keys: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    digests = b"".join(hashlib.blake2b(k.encode(), digest_size=16).digest() for k in keys)
    words = np.frombuffer(digests, dtype="<u8").reshape(-1, 2) if keys else np.zeros((0, 2), "<u8")
    return words[:, 0], words[:, 1] | np.uint64(1)


@dataclass(frozen=True)
class BloomFilter:
    bits: bytes  # little-endian bit order (numpy packbits, bitorder="little")
    num_bits: int
    num_hashes: int

    @staticmethod
    def build(keys: Sequence[str], fpp: float = 0.01) -> BloomFilter:
        n = max(len(keys), 1)
        m = math.ceil(-n * math.log(fpp) / (math.log(2) ** 2))
        m = max(64, min(MAX_BITS, m))
        k = max(1, round(m / n * math.log(2)))
        k = min(k, 16)
        array = np.zeros(m, dtype=bool)
        array[_positions(keys, m, k).ravel()] = True
        return BloomFilter(np.packbits(array, bitorder="little").tobytes(), m, k)

    def might_contain(self, keys: Sequence[str]) -> np.ndarray:
        """One bool per key: False = certainly absent."""
        if not keys:
            return np.zeros(0, dtype=bool)
        return self.might_contain_hashed(*key_hashes(keys))

    def might_contain_hashed(self, h1: np.ndarray, h2: np.ndarray) -> np.ndarray:
        """`might_contain` for keys hashed once by `key_hashes` (an index probing many
        files with one batch hashes it once)."""
        if not len(h1):
            return np.zeros(0, dtype=bool)
        array = np.unpackbits(
            np.frombuffer(self.bits, dtype=np.uint8), bitorder="little", count=self.num_bits
        ).astype(bool)
        result: np.ndarray = array[_hashed_positions(h1, h2, self.num_bits, self.num_hashes)].all(
            axis=1
        )
        return result

    def to_json(self) -> dict[str, object]:
        return {
            "bits": base64.b64encode(self.bits).decode(),
            "num_bits": self.num_bits,
            "num_hashes": self.num_hashes,
        }

    @staticmethod
    def from_json(d: dict[str, object]) -> BloomFilter:
        return BloomFilter(
            base64.b64decode(str(d["bits"])), int(str(d["num_bits"])), int(str(d["num_hashes"]))
        )


def key_hashes(keys: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """The two hash words of each key (double hashing)."""
    return _hashes(keys)


def _positions(keys: Sequence[str], m: int, k: int) -> np.ndarray:
    return _hashed_positions(*_hashes(keys), m, k)


def _hashed_positions(h1: np.ndarray, h2: np.ndarray, m: int, k: int) -> np.ndarray:
    i = np.arange(k, dtype=np.uint64)
    with np.errstate(over="ignore"):
        combined = h1[:, None] + i[None, :] * h2[:, None]
    result: np.ndarray = (combined % np.uint64(m)).astype(np.int64)
    return result
