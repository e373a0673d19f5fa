"""`flowledger table sql` on S3: how should DuckDB read a table's snapshot files?

One keyed table on MinIO, two queries (a selective one on the key range, an aggregate over
every row), three ways to give DuckDB the files, in one run:

* `cache`: the verified local cache of immutable files (what `table sql` does): the first
  query downloads each file once (cold), later queries read local copies (warm);
* `s3fs`: s3fs registered with DuckDB as an fsspec filesystem, `read_parquet('s3://...')`;
* `arrow`: a pyarrow dataset over `pyarrow.fs.S3FileSystem`, registered with DuckDB (which
  pushes projections and filters into the scan).

Each query opens a new connection (as a CLI call does). Requests are counted by MinIO's
client side where flowledger makes them (cache); s3fs/pyarrow make their own.

    python -m bench table_sql [--rows N] [--files N] [--repeat N]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import duckdb
import pyarrow as pa

from flowledger.table_sql import local_files
from storage import ObjectStore
from timeline import Table, TableSettings
from timeline.keyed import KeyedProperties

from .common import console, minio_backend, table

QUERIES = {
    "key range": "SELECT count(*), avg(v0) FROM t WHERE id BETWEEN 100000 AND 110000",
    "aggregate": "SELECT g, count(*), avg(v1), max(s) FROM t GROUP BY g ORDER BY g",
}


def _build(store: ObjectStore, rows: int, files: int) -> Table:
    # No small-file filling: one file group per batch, so the table has `files` files.
    t = Table.create(store, KeyedProperties.of("id"), TableSettings(small_file_limit=0))
    per = rows // files
    for i in range(files):  # time-ordered keys: one new file group per batch
        ids = pa.array(range(i * per, (i + 1) * per), pa.int64())
        data = {"id": ids, "g": pa.compute.cast(pa.compute.bit_wise_and(ids, 15), pa.int32())}
        for c in range(8):
            data[f"v{c}"] = pa.compute.multiply(pa.compute.cast(ids, pa.float64()), c + 0.5)
        data["s"] = pa.compute.cast(ids, pa.string())
        t.insert(pa.table(data))
    return t


def _run(connect: Callable[[], duckdb.DuckDBPyConnection], sql: str) -> float:
    start = time.perf_counter()
    con = connect()
    try:
        con.execute(sql).fetchall()
    finally:
        con.close()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="bench table_sql")
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--files", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    import pyarrow.dataset as ds
    import pyarrow.fs as pafs
    import s3fs

    with minio_backend("tablesql") as backend, tempfile.TemporaryDirectory() as tmp:
        store = backend.open().scoped("tables/t")
        t = _build(store, args.rows, args.files)
        snap = t.snapshot()
        keys = [store.url(f.path).removeprefix("s3://") for f in snap.files]
        size = sum(f.size for f in snap.files)
        st = backend.settings
        fs = s3fs.S3FileSystem(
            key=st.access_key_id,
            secret=st.secret_access_key,
            client_kwargs={"endpoint_url": st.endpoint_url, "region_name": st.region},
        )
        arrow_fs = pafs.S3FileSystem(
            access_key=st.access_key_id,
            secret_key=st.secret_access_key,
            endpoint_override=st.endpoint_url,
            region=st.region or "us-east-1",
            scheme="http",
        )
        cache = Path(tmp) / "cache"

        def via_cache() -> duckdb.DuckDBPyConnection:
            paths = local_files(store, snap.files, cache)
            con = duckdb.connect()
            listed = ", ".join(f"'{p}'" for p in paths)
            con.execute(f"CREATE VIEW t AS SELECT * FROM read_parquet([{listed}])")
            return con

        def via_s3fs() -> duckdb.DuckDBPyConnection:
            con = duckdb.connect()
            con.register_filesystem(fs)
            listed = ", ".join(f"'s3://{k}'" for k in keys)
            con.execute(f"CREATE VIEW t AS SELECT * FROM read_parquet([{listed}])")
            return con

        def via_arrow() -> duckdb.DuckDBPyConnection:
            con = duckdb.connect()
            con.register("t", ds.dataset(keys, filesystem=arrow_fs, format="parquet"))
            return con

        out = table(
            f"table sql on MinIO: {args.rows:,} rows, {len(keys)} files, {size / 2**20:.0f} MiB "
            f"(median of {args.repeat}, new connection per query)",
            "reader",
            "query",
            "first query (ms)",
            "later queries (ms)",
            "GET by flowledger (first)",
        )
        for name, connect in (("cache", via_cache), ("s3fs", via_s3fs), ("arrow", via_arrow)):
            for qname, sql in QUERIES.items():
                if name == "cache":
                    for p in cache.rglob("*.parquet"):
                        p.unlink()  # cold for each query: the first one downloads
                before = store.stats.snapshot().get("GET", 0)
                first = _run(connect, sql)
                gets = store.stats.snapshot().get("GET", 0) - before
                later = sorted(_run(connect, sql) for _ in range(args.repeat))
                out.add_row(
                    name,
                    qname,
                    f"{first * 1e3:.0f}",
                    f"{later[len(later) // 2] * 1e3:.0f}",
                    str(gets) if name == "cache" else "-",
                )
        console.print(out)


if __name__ == "__main__":
    main()
