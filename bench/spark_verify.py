"""What verifying the data files' crc32 costs a Spark read of a table on MinIO.

    python -m bench spark_verify [--quick] [--rows N]

(a) `fs.read` = `spark.read.parquet(file list)`, unverified: the baseline (the JVM reads
    byte ranges of each file; flowledger never sees the bytes).
(b) (a) plus verification the only way the native reader could get it: a second read of every
    file on the driver (GET + crc32, 8 files in parallel), one extra GET per file.
(c) the data source reader as it is: each task GETs its file whole, verifies the crc32, decodes.
(d) what (c) spends on verifying: crc32 over the same bytes already in memory (no request).
Every read scans all columns (`write.format("noop")`), so no reader skips bytes.
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bench.common import console, table
from bench.spark import frame, minio_spark
from storage import checksum_of, open_store
from timeline import Table


def scan(df: Any) -> None:
    df.write.format("noop").mode("overwrite").save()


def best(fn: Any, repeat: int) -> float:
    out = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        out.append(time.perf_counter() - started)
    return min(out)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench spark_verify")
    ap.add_argument("--quick", action="store_true", help="small smoke run (1M rows)")
    ap.add_argument("--rows", type=int, help="rows in the table (4M; quick 1M)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per variant (best is kept)")
    args = ap.parse_args(argv)
    rows = args.rows or (1_000_000 if args.quick else 4_000_000)

    import flowledger.spark as fs

    with minio_spark("flowledger-bench-verify") as (be, spark):
        s = be.settings
        uri = "s3a://bench/spark-verify/t"
        fs.write(frame(spark, rows, 8), uri)
        store = open_store("s3://bench/spark-verify/t", s)
        files = Table.open(store).snapshot().files
        size = sum(f.size for f in files)

        def second_read() -> None:
            with ThreadPoolExecutor(8) as pool:
                list(pool.map(lambda f: checksum_of(store.get(f.path)), files))

        bodies = [store.get(f.path) for f in files]
        native = best(lambda: scan(fs.read(spark, uri)), args.repeat)
        extra = best(second_read, args.repeat)
        ds = best(lambda: scan(spark.read.format("flowledger").load(uri)), args.repeat)
        crc = best(lambda: [checksum_of(b) for b in bodies], args.repeat)
        spark.stop()

    out = table(
        f"Spark read of {rows:,} rows, {len(files)} files, {size / 2**20:.0f} MiB on MinIO "
        f"(best of {args.repeat})",
        "variant", "seconds", "vs (a)", "extra GETs",
    )  # fmt: skip
    out.add_row("(a) spark.read.parquet, unverified", f"{native:.2f}", "1.00x", "0")
    out.add_row(
        "(b) (a) + second read to verify", f"{native + extra:.2f}",
        f"{(native + extra) / native:.2f}x", str(len(files)),
    )  # fmt: skip
    out.add_row("(c) data source, verified", f"{ds:.2f}", f"{ds / native:.2f}x", "0")
    out.add_row(
        "(d) of which crc32 (in memory)", f"{crc:.3f}", f"{crc / ds * 100:.1f}% of (c)", "0"
    )
    console.print(out)


if __name__ == "__main__":
    main()
