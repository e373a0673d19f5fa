"""Keyed tables: which index finds a batch's records faster, and the upsert it serves.

`python -m bench keyed_index [--rows N] [--batch B] [--file-mib M] [--quick]`

Two tables of N rows (10 columns, unpartitioned, global keys, files of about M MiB):
time-ordered integer keys, and random keys (UUIDs). On each, an upsert of B records
(80 % updates + 20 % new keys; the updates hit the newest 5 % of keys for ordered keys, any
key for random ones) and a batch of B new keys only, looked up through key ranges and bloom
filters and through the record-level index: lookup time (index + reading the candidate
files' key columns), base files read, index objects read. Then the whole upsert is run on
a copy of the table with each index. Local backend (the index's cost is CPU and bytes read).
The code under test is whatever `timeline` imports: run it with another tree first on
PYTHONPATH to compare versions (the record-level rows are skipped where it does not exist).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
import uuid
from typing import Any

import numpy as np
import pyarrow as pa

from bench.common import console, table
from storage import StoreSettings, open_store
from timeline import Table, TableSettings
from timeline.keyed import KeyedProperties
from timeline.keyed.write import copy_on_write as kw

try:
    from timeline.keyed import build_index
    from timeline.keyed.index.record_index import choose_index
except ImportError:  # an older tree: ranges and blooms only
    build_index = None  # type: ignore[assignment]
    choose_index = None  # type: ignore[assignment]

PROPS = KeyedProperties.of("id", ordering_field="ts")


def _rows(ids: Any, ts: int, rng: np.random.Generator) -> pa.Table:
    n = len(ids)
    cols: dict[str, Any] = {"id": ids, "ts": np.full(n, ts, dtype=np.int64)}
    for k in range(4):
        cols[f"f{k}"] = rng.random(n)
    for k in range(3):
        cols[f"i{k}"] = rng.integers(0, 1_000_000, n)
    cols["s"] = pa.array([f"s{v}" for v in rng.integers(0, 1000, n)], pa.string())
    return pa.table(cols)


def _keys(kind: str, start: int, n: int, rng: np.random.Generator) -> Any:
    if kind == "ordered":
        return np.arange(start, start + n, dtype=np.int64)
    return pa.array([uuid.UUID(int=int(v)).hex for v in rng.integers(0, 2**62, n)], pa.string())


def _settings(file_mib: int, index: str) -> TableSettings:
    extra: dict[str, Any] = {}
    if "keyed_index" in TableSettings.__dataclass_fields__:  # not in older trees
        extra = {"keyed_index": index, "record_index_max_deltas": 1000}
    return TableSettings(
        parquet_max_file_size=file_mib * 1024 * 1024,
        small_file_limit=0,
        local_entry_cache=False,
        **extra,
    )


def _build(root: str, kind: str, rows: int, file_mib: int) -> tuple[Table, Any]:
    rng = np.random.default_rng(7)
    t = Table.create(open_store("file://" + root, StoreSettings(fsync=False)), PROPS)
    t = Table.open(t.store, _settings(file_mib, "range_bloom"))
    chunk = 250_000
    all_keys = []
    for start in range(0, rows, chunk):
        keys = _keys(kind, start, min(chunk, rows - start), rng)
        all_keys.append(keys)
        t.upsert(_rows(keys, 0, rng))
    if kind == "ordered":
        return t, np.concatenate(all_keys)
    return t, pa.concat_arrays(all_keys)


def _batch(kind: str, keys: Any, rows: int, batch: int, new_only: bool) -> pa.Table:
    rng = np.random.default_rng(11)
    n_new = batch if new_only else batch // 5
    n_upd = batch - n_new
    if kind == "ordered":
        newest = max(n_upd, rows // 20)
        upd = rng.choice(np.arange(rows - newest, rows), n_upd, replace=False)
        ids: Any = np.concatenate([upd, np.arange(rows, rows + n_new)])
    else:
        pick = rng.choice(rows, n_upd, replace=False)
        ids = pa.concat_arrays([keys.take(pa.array(pick)), _keys(kind, 0, n_new, rng)])
    return _rows(ids, 1, rng)


def _lookup(t: Table, data: pa.Table, index: str) -> dict[str, Any]:
    """Plan only (no commit): index + candidate reads, as the upsert does them."""
    st = t.state()
    start = time.perf_counter()
    factory = choose_index(index) if choose_index is not None else None
    planner = getattr(kw, "Planner", None) or kw.__dict__["_Planner"]  # older trees
    plan = planner(t, PROPS, st, factory)
    batch = kw.prepare_batch(data, PROPS, "20990101000000000", upsert=True)
    found = plan.locate(batch)
    took = time.perf_counter() - start
    return {
        "s": took,
        "files": len(st.snapshot().files),
        "read": plan.files_read,
        "found": len(found),
        "index_objects": getattr(plan.index, "shards_read", 0),
    }


def _upsert(src: str, data: pa.Table, index: str, file_mib: int) -> float:
    with tempfile.TemporaryDirectory(prefix="bench-keyed-copy-") as tmp:
        dst = os.path.join(tmp, "t")
        shutil.copytree(src, dst)
        t = Table.open(open_store("file://" + dst, StoreSettings(fsync=False)))
        t = Table.open(t.store, _settings(file_mib, index))
        start = time.perf_counter()
        t.upsert(data)
        return time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench.keyed_index")
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--batch", type=int, default=100_000)
    parser.add_argument("--file-mib", type=int, default=4)
    parser.add_argument("--kinds", default="ordered,random")
    parser.add_argument("--no-upsert", action="store_true", help="lookups only")
    parser.add_argument("--quick", action="store_true", help="200k rows, 10k batches")
    args = parser.parse_args(argv)
    if args.quick:
        args.rows, args.batch, args.file_mib = 200_000, 10_000, 1
    load = os.getloadavg()[0]
    out = table(
        f"keyed index: {args.rows:,} rows, batches of {args.batch:,} (load {load:.1f}, "
        f"{os.cpu_count()} cores)",
        "keys",
        "batch",
        "index",
        "lookup s",
        "files read / files",
        "index objects",
        "found",
        "upsert s",
    )
    with tempfile.TemporaryDirectory(prefix="bench-keyed-index-") as tmp:
        for kind in args.kinds.split(","):
            root = os.path.join(tmp, kind)
            start = time.perf_counter()
            t, keys = _build(root, kind, args.rows, args.file_mib)
            console.print(f"{kind}: table built in {time.perf_counter() - start:.1f} s")
            indexes = ["range_bloom"]
            if build_index is not None:
                start = time.perf_counter()
                build_index(t)
                took = time.perf_counter() - start
                console.print(f"{kind}: record-level index built in {took:.1f} s")
                indexes.append("record_level")
            for label, new_only in (("80% upd + 20% new", False), ("new keys only", True)):
                data = _batch(kind, keys, args.rows, args.batch, new_only)
                for index in indexes:
                    got = _lookup(t, data, index)
                    up = ""
                    if not args.no_upsert:
                        up = f"{_upsert(root, data, index, args.file_mib):.2f}"
                    out.add_row(
                        kind,
                        label,
                        index,
                        f"{got['s']:.2f}",
                        f"{got['read']} / {got['files']}",
                        str(got["index_objects"]),
                        f"{got['found']:,}",
                        up,
                    )
    console.print(out)


if __name__ == "__main__":
    main()
