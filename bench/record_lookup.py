"""A record's current row by its key: through the table's index against a full read.

`python -m bench record_lookup [--rows N] [--files F] [--keys K] [--backend local|minio] [--quick]`

Two keyed tables of N rows in about F files (unpartitioned, integer keys in random order, so
key ranges overlap and the bloom filters decide): copy-on-write, and merge-on-read after two
delta commits of upserts and deletes. For K keys picked at random (some deleted, some never
written) each reader answers "the current row of this key": `timeline.keyed.lookup_keys`
(what `GET /tables/{name}/records` asks) against the baseline a table scan does, the whole
snapshot read and filtered by key (`Table.read`). Both answers are compared; per reader the
median and p95 milliseconds per key, the GETs per key and the bytes they fetched.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bench.common import BenchBackend, console, local_backend, median_ms, minio_backend, p95_ms
from bench.common import table as out_table
from timeline import Table, TableSettings
from timeline.keyed import RECORD_KEY_COL, KeyedProperties, lookup_keys


def _props(table_type: str) -> KeyedProperties:
    return KeyedProperties.of("id", ordering_field="ts", table_type=table_type)


def _rows(ids: np.ndarray, ts: int, rng: np.random.Generator) -> pa.Table:
    n = len(ids)
    return pa.table(
        {
            "id": ids,
            "ts": np.full(n, ts, dtype=np.int64),
            "qty": rng.integers(0, 1000, n),
            "price": rng.random(n),
            "note": pa.array([f"n{v}" for v in rng.integers(0, 1000, n)], pa.string()),
        }
    )


def _build(backend: BenchBackend, name: str, table_type: str, rows: int, files: int) -> Table:
    rng = np.random.default_rng(3)
    store = open_prefixed(backend, name)
    settings = TableSettings(small_file_limit=0, local_entry_cache=False)
    t = Table.open(Table.create(store, _props(table_type)).store, settings)
    ids = rng.permutation(rows).astype(np.int64)
    for chunk in np.array_split(ids, files):
        t.upsert(_rows(chunk, 0, rng))
    if table_type == "merge_on_read":  # two delta commits: updates, then deletes
        t.upsert(_rows(rng.choice(rows, rows // 100, replace=False).astype(np.int64), 1, rng))
        t.delete([int(k) for k in rng.choice(rows, rows // 200, replace=False)])
    else:
        t.delete([int(k) for k in rng.choice(rows, rows // 200, replace=False)])
    return t


def open_prefixed(backend: BenchBackend, name: str) -> Any:
    from storage import open_store

    return open_store(f"{backend.uri.rstrip('/')}/{name}", backend.settings)


@contextlib.contextmanager
def _counted_gets(t: Table) -> Iterator[list[int]]:
    """The bytes of every `get` / `get_object` the table's store serves while inside."""
    seen: list[int] = []
    store = t.store
    get, get_object = store.get, store.get_object

    def counted_get(key: str, *a: Any, **k: Any) -> bytes:
        data = get(key, *a, **k)
        seen.append(len(data))
        return data

    def counted_get_object(key: str) -> Any:
        data, info = get_object(key)
        seen.append(len(data))
        return data, info

    store.get, store.get_object = counted_get, counted_get_object  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        del store.get, store.get_object


def _by_scan(t: Table, key: str) -> list[dict[str, Any]]:
    snap = t.read()
    rows: list[dict[str, Any]] = snap.filter(pc.equal(snap[RECORD_KEY_COL], key)).to_pylist()
    return rows


def _by_index(t: Table, key: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = lookup_keys(t, [key]).to_pylist()
    return rows


Measured = tuple[list[float], list[int], list[int], list[list[dict[str, Any]]]]


def _measure(
    t: Table, keys: list[str], reader: Callable[[Table, str], list[dict[str, Any]]]
) -> Measured:
    times, gets, fetched, answers = [], [], [], []
    for key in keys:
        fresh = Table.open(t.store, TableSettings(local_entry_cache=False))
        fresh.state()  # the timeline's load is the same for both readers: leave it out
        with _counted_gets(fresh) as seen:
            start = time.perf_counter()
            answers.append(reader(fresh, key))
            times.append(time.perf_counter() - start)
        gets.append(len(seen))
        fetched.append(sum(seen))
    return times, gets, fetched, answers


def _rowset(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted((r["id"], r["ts"], r["qty"]) for r in rows)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="bench.record_lookup")
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--files", type=int, default=40)
    ap.add_argument("--keys", type=int, default=20)
    ap.add_argument("--backend", choices=("local", "minio"), default="minio")
    ap.add_argument("--quick", action="store_true", help="100k rows, 10 files, 10 keys")
    args = ap.parse_args(argv)
    if args.quick:
        args.rows, args.files, args.keys = 100_000, 10, 10
    backends = {"local": local_backend, "minio": minio_backend}
    rng = np.random.default_rng(5)
    picked = [str(k) for k in rng.choice(args.rows, args.keys - 2, replace=False)]
    keys = [*picked, str(args.rows + 7), "-1"]  # two keys no row holds
    out = out_table(
        f"record lookup: {args.rows:,} rows in ~{args.files} files, {args.keys} keys, "
        f"{args.backend} (load {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores)",
        "table",
        "reader",
        "ms per key, median",
        "p95",
        "vs full read",
        "GETs per key",
        "MiB fetched per key",
        "answers equal",
    )
    with backends[args.backend]() as backend:
        for table_type in ("copy_on_write", "merge_on_read"):
            t = _build(backend, table_type, table_type, args.rows, args.files)
            scan_t, scan_g, scan_b, scan_a = _measure(t, keys, _by_scan)
            idx_t, idx_g, idx_b, idx_a = _measure(t, keys, _by_index)
            same = all(_rowset(a) == _rowset(b) for a, b in zip(scan_a, idx_a, strict=True))
            base = median_ms(scan_t)
            for label, ts, gs, bs in (("full read (baseline)", scan_t, scan_g, scan_b),
                                      ("lookup_keys (index)", idx_t, idx_g, idx_b)):  # fmt: skip
                out.add_row(
                    table_type,
                    label,
                    f"{median_ms(ts):.1f}",
                    f"{p95_ms(ts):.1f}",
                    f"{median_ms(ts) / base:.3f}x",
                    f"{float(np.median(gs)):.0f}",
                    f"{float(np.median(bs)) / 2**20:.2f}",
                    "yes" if same else "NO",
                )
    console.print(out)


if __name__ == "__main__":
    main()
