"""The index of a merge-on-read table: a file group may hold a key when its base file or one
of its logs may.

A delta commit routes a key to a file group's log without reading the slice, so a key new to
the table can live in a log (docs/tables.md, "Where new keys live"). Such a key is found
again because every log file records, with its commit, the key range and bloom filter of the
keys it upserts (`key_stats`, the same fields as a base file's write stats), and the index
consults them beside the base file's. Logs written before that (format 1 and 2) held only
keys their writer had found in the slice, which the base's range and bloom already name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..metadata import DataFile
from .bloom import INLINE_MAX_BYTES, BloomFilter
from .index import KeyIndex
from .slices import MorSlice


def log_key_stats(keys: pa.Array, fpp: float, integer_key: pa.Array | None) -> dict[str, Any]:
    """The index fields of a log upserting `keys` (record keys as text; `integer_key`: the
    single integer key column's values, whose range is compared as numbers)."""
    if not len(keys):
        return {}
    mm = pc.min_max(keys)
    out: dict[str, Any] = {"min_key": mm["min"].as_py(), "max_key": mm["max"].as_py()}
    if integer_key is not None and len(integer_key):
        nm = pc.min_max(integer_key)
        out["key_min"], out["key_max"] = nm["min"].as_py(), nm["max"].as_py()
    bf = BloomFilter.build(keys, fpp)
    if len(bf.bits) <= INLINE_MAX_BYTES:  # a bigger block is pruned by its range alone:
        out["bloom"] = bf.to_json()  # no sidecar object for the cleaner to follow
    return out


def _as_file(
    sl: MorSlice, path: str, rows: int, stats: Mapping[str, Any], key: str | None
) -> DataFile:
    col: dict[str, Mapping[str, Any]] = {}
    if key is not None and "key_min" in stats:
        col[key] = {"min": stats["key_min"], "max": stats["key_max"]}
    return DataFile(path, 0, rows, sl.partition, sl.group, col)


class SliceIndex:
    """A KeyIndex over slices: asked about base files, it answers for their whole slices
    (base or logs), under the base file's path."""

    def __init__(self, inner: KeyIndex, slices: Mapping[str, MorSlice]) -> None:
        self.inner = inner
        self.logs: dict[str, list[DataFile]] = {}
        key = getattr(inner, "integer_key", None)  # RangeBloomIndex compares it as numbers
        for sl in slices.values():
            for _, lf in sl.logs:
                if lf.upserts and "min_key" in lf.key_stats:
                    f = _as_file(sl, lf.ref, lf.upserts, lf.key_stats, key)
                    self.logs.setdefault(sl.base.path, []).append(f)

    def candidates(self, files: Sequence[DataFile], keys: Sequence[str]) -> dict[str, list[int]]:
        owner = {f.path: f.path for f in files}
        asked = list(files)
        for f in files:
            for lf in self.logs.get(f.path, ()):
                owner[lf.path] = f.path
                asked.append(lf)
        found = self.inner.candidates(asked, keys)
        if len(asked) == len(files):
            return found  # no log keys to consult: the base files answer alone
        out: dict[str, set[int]] = {}
        for path, hits in found.items():
            out.setdefault(owner[path], set()).update(hits)
        return {p: sorted(h) for p, h in out.items()}
