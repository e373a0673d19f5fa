"""A keyed table's life under each data-file codec (`TableSettings.parquet_compression_codec`),
zstd (the default) as the baseline, side by side in one run.

`python -m bench parquet_codec [--rows N] [--codecs zstd,snappy,lz4] [--quick]`

The upsert benchmark's table (bench/upsert_data.py's ten columns, N rows loaded in ten
commits of consecutive keys over 20 partitions), then an upsert of 100k keys (80 % updates
drawn from the whole table, 20 % new), a delete of 10k keys and a full read, in a fresh
copy-on-write table on the local backend per codec. Per codec and step: CPU seconds of the
process (every thread; the steps are CPU-bound and the machine may be shared), wall seconds,
GETs and PUTs, and at the end the bytes of the table's files; ratios against zstd. Every
codec must end with the same rows and the same `qty` sum.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bench.common import console, table
from bench.upsert_data import rows_for
from storage import StoreSettings, open_store
from timeline import ParquetCodec, Table, TableSettings
from timeline.keyed import KeyedProperties

PROPS = KeyedProperties.of("id", ordering_field="ts", partition_by="part")
STEPS = ("load", "upsert", "delete", "read")


@dataclass
class Result:
    codec: str
    cpu: dict[str, float] = field(default_factory=dict)
    wall: dict[str, float] = field(default_factory=dict)
    requests: dict[str, str] = field(default_factory=dict)
    written: int = 0  # bytes of the table's current files after the delete
    rows: int = 0
    qty: int = 0


@dataclass(frozen=True)
class Inputs:
    loads: list[pa.Table]
    upsert: pa.Table
    delete: list[int]


def _inputs(rows: int, rng: np.random.Generator) -> Inputs:
    per = -(-rows // 10)
    loads = [
        rows_for(np.arange(lo, min(lo + per, rows), dtype=np.int64), 1, 20, rng)
        for lo in range(0, rows, per)
    ]
    batch = min(100_000, rows // 10)
    updated = rng.choice(rows, int(batch * 0.8), replace=False)
    new = np.arange(rows, rows + batch - len(updated))
    upsert = rows_for(np.concatenate([updated, new]).astype(np.int64), 2, 20, rng)
    delete = rng.choice(rows, min(10_000, rows // 100), replace=False).tolist()
    return Inputs(loads, upsert, delete)


def _run(codec: str, inputs: Inputs) -> Result:
    out = Result(codec)
    with tempfile.TemporaryDirectory(prefix="flowledger-bench-codec-") as tmp:
        store = open_store("file://" + tmp, StoreSettings(fsync=False))
        settings = TableSettings(local_entry_cache=False, parquet_compression_codec=codec)  # type: ignore[arg-type]
        t = Table.create(store, PROPS, settings)

        def step(name: str, fn: object) -> object:
            store.stats.reset()
            c0, w0 = time.process_time(), time.perf_counter()
            got = fn()  # type: ignore[operator]
            out.cpu[name] = time.process_time() - c0
            out.wall[name] = time.perf_counter() - w0
            counts = store.stats.snapshot()
            out.requests[name] = f"{counts.get('GET', 0)} / {counts.get('PUT', 0)}"
            return got

        step("load", lambda: [t.insert(d) for d in inputs.loads])
        step("upsert", lambda: t.upsert(inputs.upsert))
        step("delete", lambda: t.delete(inputs.delete))
        read = step("read", lambda: t.read())
        assert isinstance(read, pa.Table)
        out.rows = read.num_rows
        out.qty = int(pc.sum(read.column("qty")).as_py())
        out.written = sum(f.size for f in t.snapshot().files)
    return out


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "-"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench parquet_codec", description=__doc__)
    ap.add_argument("--rows", type=int, default=4_000_000)
    ap.add_argument("--codecs", default="zstd,snappy,lz4", help="zstd first: the baseline")
    ap.add_argument("--quick", action="store_true", help="200k rows")
    args = ap.parse_args(argv)
    rows = 200_000 if args.quick else args.rows
    codecs = [ParquetCodec.parse(c).value for c in args.codecs.split(",")]
    inputs = _inputs(rows, np.random.default_rng(20))
    _run(codecs[0], _inputs(min(rows, 100_000), np.random.default_rng(1)))  # warm-up
    results = [_run(c, inputs) for c in codecs]
    base = results[0]
    t = table(
        f"a keyed table's life by data-file codec: {rows:,} rows (local backend; "
        f"ratios against {base.codec})",
        "codec", "step", "CPU s", "vs base", "wall s", "GET / PUT", "table MiB", "vs base",
    )  # fmt: skip
    for r in results:
        for i, name in enumerate(STEPS):
            size = (
                (f"{r.written / 2**20:.1f}", _ratio(r.written, base.written)) if not i else ("", "")
            )
            t.add_row(
                r.codec if not i else "", name, f"{r.cpu[name]:.2f}",
                _ratio(r.cpu[name], base.cpu[name]), f"{r.wall[name]:.2f}", r.requests[name],
                *size,
            )  # fmt: skip
    console.print(t)
    if len({(r.rows, r.qty) for r in results}) != 1:
        raise SystemExit(
            f"the codecs ended with different rows: {[(r.rows, r.qty) for r in results]}"
        )


if __name__ == "__main__":
    main()
