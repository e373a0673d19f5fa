"""Keyed load: the commits that fill small files, with their row groups copied as bytes and
with them decoded and encoded again (the baseline), side by side in one run.

`python -m bench small_file_fill [--rows N] [--partitions P] [--load-batches K]
[--batches-per-commit B] [--rewrite-ratio R] [--quick]`

The upsert benchmark's load (bench/upsert_data.py's ten columns, N rows in K commits of
consecutive keys over P partitions, each commit a stream of B batches, as the upsert
benchmark feeds its load files' row groups to `Table.insert`: B = 1, the default, is written
as a table; B > 1 as a streamed insert, keyed/write/stream.py), written twice into fresh
copy-on-write tables on the local backend: once as it runs (a small file filled with new
records keeps its row groups as bytes, timeline/parquet_splice.py) and once with
`base_copy.COPY_ROW_GROUPS` off. Per mode: CPU seconds of the process (every thread,
`time.process_time`) for the whole load and for the commits that filled a small file, wall
seconds, GETs and PUTs, bytes written, and the ratio to the decoding baseline. The load is
CPU-bound; the machine may be shared, so CPU seconds are the figure to read.

A stream picks a small file on the batch in hand (docs/tables.md, "Streamed inserts"): at the
default `small_file_rewrite_ratio` (1) a batch smaller than the file fills none, so a load of
equal commits in B batches fills nothing. `--rewrite-ratio B` lets a batch of a commit fill
what a whole commit would (`inf`: Hudi's rule, every small file filled).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from bench.common import console, table
from bench.upsert_data import rows_for
from storage import StoreSettings, open_store
from timeline import Table, TableSettings
from timeline.file_groups.sidecars import WRITE_STATS
from timeline.keyed import KeyedProperties
from timeline.keyed.write import base_copy

PROPS = KeyedProperties.of("id", ordering_field="ts", partition_by="part")


@dataclass
class Result:
    mode: str
    cpu: float = 0.0
    fill_cpu: float = 0.0
    fills: int = 0  # commits that filled a small file
    wall: float = 0.0
    gets: int = 0
    puts: int = 0
    written: int = 0  # bytes of the table's files after the load
    rows: int = 0


def _load(mode: str, loads: list[pa.Table], batches: int, ratio: float) -> Result:
    base_copy.COPY_ROW_GROUPS = mode == "copy"
    out = Result(mode)
    with tempfile.TemporaryDirectory(prefix="flowledger-bench-fill-") as tmp:
        store = open_store("file://" + tmp, StoreSettings(fsync=False))
        settings = TableSettings(local_entry_cache=False, small_file_rewrite_ratio=ratio)
        t = Table.create(store, PROPS, settings)
        store.stats.reset()
        for data in loads:
            per = -(-data.num_rows // batches)
            reader = pa.RecordBatchReader.from_batches(data.schema, data.to_batches(per))
            c0, w0 = time.process_time(), time.perf_counter()
            done = t.insert(reader)
            cpu = time.process_time() - c0
            out.wall += time.perf_counter() - w0
            out.cpu += cpu
            stats = t.entry(done.time).metadata[WRITE_STATS]
            if any(s.get("prev_commit") for s in stats):
                out.fill_cpu += cpu
                out.fills += 1
        counts = store.stats.snapshot()
        out.gets, out.puts = counts.get("GET", 0), counts.get("PUT", 0)
        files = t.snapshot().files
        out.written = sum(f.size for f in files)
        out.rows = sum(f.rows for f in files)
    base_copy.COPY_ROW_GROUPS = True
    return out


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "-"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.small_file_fill")
    ap.add_argument("--rows", type=int, default=4_000_000)
    ap.add_argument("--partitions", type=int, default=20)
    ap.add_argument("--load-batches", type=int, default=10)
    ap.add_argument(
        "--batches-per-commit", type=int, default=1,
        help="batches each commit is fed as (more than one: a streamed insert)",
    )  # fmt: skip
    ap.add_argument("--rewrite-ratio", type=float, default=TableSettings.small_file_rewrite_ratio)
    ap.add_argument("--quick", action="store_true", help="200k rows")
    args = ap.parse_args(argv)
    rows = 200_000 if args.quick else args.rows
    rng = np.random.default_rng(20)
    per = -(-rows // args.load_batches)
    loads = [
        rows_for(np.arange(lo, min(lo + per, rows), dtype=np.int64), 1, args.partitions, rng)
        for lo in range(0, rows, per)
    ]
    # The baseline first, then the copy (the first run also warms imports and caches).
    batches = max(1, args.batches_per_commit)
    ratio = args.rewrite_ratio
    results = [_load(mode, loads, batches, ratio) for mode in ("decode", "copy")]
    base = results[0]
    t = table(
        f"small-file fill: {rows:,} rows in {len(loads)} commits over {args.partitions} "
        f"partitions, {'streamed in ' + str(batches) + ' batches' if batches > 1 else 'one batch'}"
        f" a commit, rewrite ratio {ratio:g} (local backend)",
        "mode", "load CPU s", "vs decode", "fill commits", "their CPU s", "vs decode",
        "wall s", "GET", "PUT", "MiB", "rows",
    )  # fmt: skip
    for r in results:
        label: Any = "copy" if r.mode == "copy" else "decode (base)"
        t.add_row(
            label, f"{r.cpu:.2f}", _ratio(r.cpu, base.cpu), str(r.fills), f"{r.fill_cpu:.2f}",
            _ratio(r.fill_cpu, base.fill_cpu), f"{r.wall:.2f}", str(r.gets), str(r.puts),
            f"{r.written / 2**20:.1f}", f"{r.rows:,}",
        )  # fmt: skip
    console.print(t)
    if results[0].rows != results[1].rows:
        raise SystemExit("the two loads hold different row counts")


if __name__ == "__main__":
    main()
