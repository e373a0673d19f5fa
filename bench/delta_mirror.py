"""A Delta Lake transaction log mirroring a copy-on-write keyed table: a prototype, not product.

After each flowledger commit, one Delta commit (`_delta_log/N.json`, written by delta-rs) adds
the files the new snapshot reads and removes the ones it no longer does, so delta-rs (and any
Delta reader) reads the table's rows without flowledger. Measured per commit against the
plain commit: seconds, and objects written (each is one PUT on S3); then checked: delta-rs,
and DuckDB over delta-rs's file list, count exactly the table's rows after every commit.

    python -m bench delta_mirror [--commits N] [--rows N] [--batch N]
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable
from deltalake import Schema as DeltaSchema
from deltalake.transaction import AddAction, RemoveAction, create_table_with_add_actions
from rich.console import Console

from storage import open_store
from timeline import Table
from timeline.keyed import KeyedProperties

from .common import local_backend, table


def _objects(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def _schema(files: list[str], root: Path) -> pa.Schema:
    return pa.unify_schemas([pq.read_schema(root / f) for f in files])


class DeltaMirror:
    """Keeps `_delta_log/` under the table's folder in step with its snapshot."""

    def __init__(self, t: Table, root: Path) -> None:
        self.t, self.root, self.current = t, root, dict[str, tuple[int, int]]()
        self.schema: pa.Schema | None = None

    def sync(self) -> None:
        snap = self.t.snapshot()
        now = {f.path: (f.size, f.rows) for f in snap.files}
        ms = int(time.time() * 1000)
        adds = [
            AddAction(p, size, {}, ms, True, f'{{"numRecords": {rows}}}')
            for p, (size, rows) in now.items()
            if p not in self.current
        ]
        removes = [
            RemoveAction(p, True, ms, size, {})
            for p, (size, _) in self.current.items()
            if p not in now
        ]
        # Only the new files can add columns: the schema is widened by theirs alone.
        added = _schema([a.path for a in adds], self.root) if adds else None
        self.schema = pa.unify_schemas([s for s in (self.schema, added) if s is not None])
        schema = DeltaSchema.from_arrow(self.schema)
        uri = str(self.root)
        if not self.current:
            create_table_with_add_actions(uri, schema, adds, mode="error")
        else:
            DeltaTable(uri).create_write_transaction([*adds, *removes], "append", schema)
        self.current = now


def _batch(start: int, n: int, total: int, version: int) -> pa.Table:
    ids = [(start + i * 7919) % total for i in range(n)]
    return pa.table({"id": ids, "p": [i % 8 for i in ids], "v": [version] * n})


def main(argv: list[str] | None = None) -> None:
    args = argv or []

    def opt(name: str, default: int) -> int:
        return int(args[args.index(name) + 1]) if name in args else default

    commits, rows, batch = opt("--commits", 20), opt("--rows", 200_000), opt("--batch", 2_000)
    plain_s, mirror_s, plain_objs, mirror_objs = [], [], [], []
    read_ok = True
    with local_backend() as backend:
        uri = backend.uri + "/t"
        root = Path(uri.removeprefix("file://"))
        t = Table.create(open_store(uri), KeyedProperties.of("id", partition_by=("p",)))
        t.upsert(pa.table({"id": list(range(rows)), "p": [i % 8 for i in range(rows)],
                           "v": [0] * rows}))  # fmt: skip
        mirror = DeltaMirror(t, root)
        mirror.sync()
        for c in range(1, commits + 1):
            before = _objects(root)
            start = time.perf_counter()
            t.upsert(_batch(c * batch, batch, rows, c))
            plain_s.append(time.perf_counter() - start)
            mid = _objects(root)
            start = time.perf_counter()
            mirror.sync()
            mirror_s.append(time.perf_counter() - start)
            plain_objs.append(len(mid - before))
            mirror_objs.append(len(_objects(root) - mid))
            expected = t.snapshot().rows
            dt = DeltaTable(str(root))
            got = dt.to_pyarrow_table(columns=["id"]).num_rows
            files = dt.file_uris()
            row = (
                duckdb.connect()
                .execute("SELECT count(*) FROM read_parquet(?, union_by_name=true)", [files])
                .fetchone()
            )
            read_ok &= got == expected == (row[0] if row else -1)
        folder = (
            duckdb.connect()
            .execute(f"SELECT count(*) FROM read_parquet('{root}/data/**/*.parquet')")
            .fetchone()
        )
        log_bytes = sum(p.stat().st_size for p in (root / "_delta_log").glob("*"))
    out = table(
        f"Delta mirror of a copy-on-write table: {commits} upserts of {batch:,} rows into "
        f"{rows:,} rows, 8 partitions, local filesystem (cpus={os.cpu_count()}, "
        f"load={os.getloadavg()[0]:.1f})",
        "per commit", "median s", "s / plain", "objects written (PUTs)", "PUTs / plain",
    )  # fmt: skip
    pm, mm = statistics.median(plain_s), statistics.median(mirror_s)
    po, mo = statistics.median(plain_objs), statistics.median(mirror_objs)
    out.add_row("plain flowledger commit", f"{pm:.3f}", "1.00", f"{po:.0f}", "1.00")
    out.add_row("+ Delta log commit (delta-rs)", f"{mm:.3f}", f"+{mm / pm:.2f}", f"{mo:.0f}",
                f"+{mo / po:.2f}")  # fmt: skip
    console = Console(width=140)
    console.print(out)
    console.print(
        f"delta-rs and DuckDB (over delta-rs's file list) read exactly the table's rows after "
        f"every commit: {read_ok}; DuckDB over the data folder: {folder[0] if folder else '?'} "
        f"rows (table: {expected}); _delta_log: {log_bytes:,} bytes"
    )


if __name__ == "__main__":
    main()
