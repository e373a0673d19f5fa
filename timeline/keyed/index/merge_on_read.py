"""The index of a merge-on-read table: a file group may hold a key when its base file or one
of its logs may.

A delta commit routes a key to a file group's log without reading the slice, so a key new to
the table can live in a log (docs/tables.md, "Where new keys live"). Such a key is found
again because the log's record in its commit carries an index entry for it:

- `base`: the slice's base file when it was written, and `beyond_base`: the key range and
  bloom filter of the upserted keys that base's recorded range and bloom do not name (a
  bloom answers the same for a key every time, so the others are found through the base).
  Usually there are none: only a new key a false positive routed into the log, or one an
  earlier log holds. So a lookup probes about one filter per file group however many delta
  commits its slice has, and the false positives of log filters no longer add up with their
  number. A log attached to another base than the one it names (a compaction that
  completed while it was written, whose filter never saw the log's keys) is consulted by
  its key range alone;
- `min_key`/`max_key` (and `key_min`/`key_max` for a single integer key): the range of all
  its upserted keys. Logs written before `base` existed also carry a bloom filter of all of
  them and are probed as they were.

Logs of format 1 and 2 held only keys their writer had found in the slice, which the base's
range and bloom already name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...file_groups import FileSlice
from ...metadata import DataFile
from .bloom import INLINE_MAX_BYTES, BloomFilter
from .ranges import BEYOND_BASE, KeyIndex


def _range_stats(keys: pa.Array, integer_key: pa.Array | None) -> dict[str, Any]:
    mm = pc.min_max(keys)
    out: dict[str, Any] = {"min_key": mm["min"].as_py(), "max_key": mm["max"].as_py()}
    if integer_key is not None and len(integer_key):
        nm = pc.min_max(integer_key)
        out["key_min"], out["key_max"] = nm["min"].as_py(), nm["max"].as_py()
    return out


def _range_bloom(keys: pa.Array, fpp: float, integer_key: pa.Array | None) -> dict[str, Any]:
    out = _range_stats(keys, integer_key)
    bf = BloomFilter.build(keys, fpp)
    if len(bf.bits) <= INLINE_MAX_BYTES:  # a bigger block is pruned by its range alone:
        out["bloom"] = bf.to_json()  # no sidecar object for the cleaner to follow
    return out


def log_key_stats(
    keys: pa.Array,
    fpp: float,
    integer_key: pa.Array | None,
    *,
    base: str | None = None,
    beyond: pa.Array | None = None,
) -> dict[str, Any]:
    """The index fields of a log upserting `keys` (record keys as text; `integer_key`: the
    single integer key column's values, whose range is compared as numbers).

    With `base` (the slice's base file), a bloom filter covers only the keys (a mask over
    `keys`, `beyond`) that base's recorded range and bloom do not name; without it, all of
    them (the format before `base`)."""
    if not len(keys):
        return {}
    if base is None:
        return _range_bloom(keys, fpp, integer_key)
    out = _range_stats(keys, integer_key)
    out["base"] = base
    if beyond is not None and pc.any(beyond).as_py():
        ints = integer_key.filter(beyond) if integer_key is not None else None
        out["beyond_base"] = _range_bloom(keys.filter(beyond), fpp, ints)
    return out


def _as_file(
    sl: FileSlice, path: str, rows: int, stats: Mapping[str, Any], key: str | None
) -> DataFile:
    col: dict[str, Mapping[str, Any]] = {}
    if key is not None and "key_min" in stats:
        col[key] = {"min": stats["key_min"], "max": stats["key_max"]}
    return DataFile(path, 0, rows, sl.partition, sl.group, col)


class SliceIndex:
    """A KeyIndex over slices: asked about base files, it answers for their whole slices
    (base or logs), under the base file's path."""

    def __init__(
        self, inner: KeyIndex, slices: Mapping[str, FileSlice], *, record_base_hits: bool = False
    ) -> None:
        """`record_base_hits`: `inner` reads the base files' recorded ranges and blooms as
        they are (the default index): remember which keys each base named, so a writer
        knows which keys its logs must index beyond their base (`named_by_base`) without
        probing (and fetching) the base filters again."""
        self.inner = inner
        self.logs: dict[str, list[DataFile]] = {}
        self.base_hits: dict[str, set[str]] | None = {} if record_base_hits else None
        key = getattr(inner, "integer_key", None)  # RangeBloomIndex compares it as numbers
        for sl in slices.values():
            for _, lf in sl.logs:
                ks = lf.key_stats
                if not lf.upserts or "min_key" not in ks:
                    continue
                if "base" not in ks or ks["base"] != sl.base.path:
                    # all its keys (a log written before `base`, by range and bloom; or
                    # one attached to a newer base than its writer saw, by range alone,
                    # since its record holds no bloom of every key)
                    f = _as_file(sl, lf.ref, lf.upserts, ks, key)
                elif "beyond_base" in ks:
                    beyond = ks["beyond_base"]
                    f = _as_file(sl, lf.ref + BEYOND_BASE, lf.upserts, beyond, key)
                else:
                    continue  # the base's range and bloom name every key it upserts
                self.logs.setdefault(sl.base.path, []).append(f)

    def candidates(self, files: Sequence[DataFile], keys: Sequence[str]) -> dict[str, list[int]]:
        owner = {f.path: f.path for f in files}
        asked = list(files)
        for f in files:
            for lf in self.logs.get(f.path, ()):
                owner[lf.path] = f.path
                asked.append(lf)
        found = self.inner.candidates(asked, keys)
        if self.base_hits is not None:
            for path, hits in found.items():
                if owner[path] == path:
                    self.base_hits.setdefault(path, set()).update(keys[i] for i in hits)
        if len(asked) == len(files):
            return found  # no log keys to consult: the base files answer alone
        out: dict[str, set[int]] = {}
        for path, hits in found.items():
            out.setdefault(owner[path], set()).update(hits)
        return {p: sorted(h) for p, h in out.items()}

    def named_by_base(self, base: DataFile, keys: pa.Array) -> pa.Array | None:
        """Per key of a log written to `base`'s slice (a key this index named that slice
        for): whether the base's recorded range and bloom name it; None when unknown."""
        if self.base_hits is None:
            return None
        named = self.base_hits.get(base.path)
        if not named:
            return pa.array(np.zeros(len(keys), dtype=bool))
        return pc.is_in(keys, value_set=pa.array(list(named), pa.string()))
