"""Spark writes to MinIO: plain `df.write.parquet` (baseline) vs the timeline's two paths.

    python -m bench spark [--quick] [--rows N]

(a) `df.write.parquet("s3a://...")`, no timeline: the baseline.
(b) `df.write.format("flowledger")`: the Python data source (tasks write with pyarrow + boto3).
(c) `flowledger.spark.write(df, uri)`: Spark's JVM Parquet writer into the instant's prefix,
    then footers and one commit on the driver.
(c+hook) as (c) with a no-op commit hook: the cost of the post-commit seam provenance uses.
Requests: s3a's (JVM storage statistics: PUT/LIST/HEAD/COPY/DELETE of the whole job) and the
driver's flowledger store (open, begin, list the instant's prefix, footers, commit).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from collections.abc import Iterator
from typing import Any

from bench.common import console, minio_backend, table

S3A_REQUESTS = ("object_put_request", "object_list_request", "object_metadata_request",
                "object_copy_requests", "object_delete_request", "object_continue_list_request",
                "multipart_upload_completed", "object_multipart_initiated")  # fmt: skip


def s3a_requests(spark: Any, path: str) -> dict[str, int]:
    """Cumulative request counters of the s3a filesystem Spark uses for `path`."""
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    stats = jvm.org.apache.hadoop.fs.Path(path).getFileSystem(conf).getStorageStatistics()
    out = {}
    it = stats.getLongStatistics()
    while it.hasNext():
        s = it.next()
        if s.getName() in S3A_REQUESTS:
            out[s.getName()] = int(s.getValue())
    return out


def delta(after: dict[str, int], before: dict[str, int]) -> int:
    return sum(after.get(k, 0) - before.get(k, 0) for k in after)


def frame(spark: Any, rows: int, partitions: int) -> Any:
    return spark.range(0, rows, numPartitions=partitions).selectExpr(
        "id", "id % 100 as k", "rand(7) as v", "concat('row-', cast(id as string)) as s"
    )


@contextlib.contextmanager
def minio_spark(app_name: str) -> Iterator[tuple[Any, Any]]:
    """A fresh MinIO (bucket "bench") and a local[2] Spark session reaching it through the
    standard AWS variables, as a user's job would; the session reports to the bench repo."""
    import flowledger.spark as fs

    with minio_backend("bench") as be:
        s = be.settings
        os.environ.update(
            AWS_ENDPOINT_URL=str(s.endpoint_url), AWS_ACCESS_KEY_ID=str(s.access_key_id),
            AWS_SECRET_ACCESS_KEY=str(s.secret_access_key), AWS_REGION=s.region,
        )  # fmt: skip
        spark = fs.session(
            repo=be.uri,
            master="local[2]",
            app_name=app_name,
            conf={
                "spark.ui.enabled": "false",
                "spark.ui.showConsoleProgress": "false",
                "spark.driver.memory": "2g",
            },
        )
        spark.sparkContext.setLogLevel("ERROR")
        yield be, spark


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench spark")
    ap.add_argument("--quick", action="store_true", help="small smoke run (1M rows)")
    ap.add_argument("--rows", type=int, help="rows per write (10M; quick 1M)")
    ap.add_argument("--partitions", type=int, default=8, help="Spark tasks (files) per write")
    ap.add_argument("--repeat", type=int, default=2, help="runs per variant (best is kept)")
    args = ap.parse_args(argv)
    rows = args.rows or (1_000_000 if args.quick else 10_000_000)

    import flowledger.spark as fs

    with minio_spark("flowledger-bench") as (be, spark):
        base = "s3a://bench/spark"
        hook_calls: list[str] = []
        hook_s: list[float] = []

        def plain(path: str) -> dict[str, str]:
            frame(spark, rows, args.partitions).write.parquet(path)
            return {}

        def datasource(path: str) -> dict[str, str]:
            frame(spark, rows, args.partitions).write.format("flowledger").mode("append").save(path)
            return {}

        last_native: list[fs.CommitInfo] = []

        def native(path: str) -> dict[str, str]:
            info = fs.write(frame(spark, rows, args.partitions), path)
            last_native[:] = [info]
            return dict(info.extra)

        def native_hook(path: str) -> dict[str, str]:
            return native(path)

        variants = [
            ("(a) df.write.parquet", plain),
            ("(c) flowledger.spark.write", native),
            ("(c) + no-op commit hook", native_hook),
            ("(b) data source", datasource),
        ]
        # Warm-up (JVM classes, Python workers, s3a connections) outside the measurement.
        frame(spark, 1000, 2).write.parquet(f"{base}/warmup-a")
        frame(spark, 1000, 2).write.format("flowledger").mode("append").save(f"{base}/warmup-b")
        fs.write(frame(spark, 1000, 2), f"{base}/warmup-c")
        results: dict[str, tuple[float, int, dict[str, str]]] = {}
        for run in range(args.repeat):
            order = variants if run % 2 == 0 else variants[::-1]  # no variant always goes first
            for name, fn in order:
                if name == "(b) data source" and run > 0 and not args.quick:
                    continue  # slow (Python workers); once is enough to report it honestly
                if "hook" in name:

                    def noop(info: fs.CommitInfo) -> None:
                        t = time.perf_counter()
                        hook_calls.append(info.instant_time)
                        hook_s.append(time.perf_counter() - t)

                    kept = fs.commit_hooks(spark)
                    for hook in kept:
                        fs.remove_commit_hook(spark, hook)
                    fs.add_commit_hook(spark, noop)
                    fs.register(spark)
                path = f"{base}/{name[1]}-{run}"
                before = s3a_requests(spark, path)
                started = time.perf_counter()
                extra = fn(path)
                secs = time.perf_counter() - started
                reqs = delta(s3a_requests(spark, path), before)
                if "hook" in name:
                    fs.remove_commit_hook(spark, noop)
                    for hook in kept:
                        fs.add_commit_hook(spark, hook)
                    fs.register(spark)
                best = results.get(name)
                if best is None or secs < best[0]:
                    results[name] = (secs, reqs, extra)
        baseline = results["(a) df.write.parquet"][0]
        native_s = results["(c) flowledger.spark.write"][0]
        out = table(
            f"Spark writes of {rows:,} rows in {args.partitions} tasks to MinIO "
            f"(best of {args.repeat}; local[2])",
            "variant", "seconds", "rows/s", "vs (a)", "s3a requests", "flowledger requests",
            "commit s",
        )  # fmt: skip
        for name, (secs, reqs, extra) in results.items():
            out.add_row(
                name,
                f"{secs:.1f}",
                f"{rows / secs:,.0f}",
                f"{baseline / secs:.2f}x",
                str(reqs),
                extra.get("requests", "-"),
                extra.get("commit_s", "-"),
            )
        console.print(out)
        with_hook = results["(c) + no-op commit hook"][0]
        console.print(
            f"hook overhead: {(with_hook - native_s) / native_s * 100:+.1f}% of (c)'s wall time "
            f"({len(hook_calls)} hook calls, {sum(hook_s) * 1e6:.0f} µs inside them)"
        )
        console.print(crc32_cost(last_native[0], be.settings, native_s))
        spark.stop()


def crc32_cost(info: Any, settings: Any, job_s: float) -> str:
    """What a crc32 per data file would cost the native path if the driver computed it after
    the job (every byte read back once, files in parallel) — the measurement behind leaving it
    to the tasks (see docs/spark.md)."""
    import zlib
    from concurrent.futures import ThreadPoolExecutor

    from storage import open_store
    from storage.uri import parse_uri

    store = open_store(str(parse_uri(info.table_uri)), settings)
    root = info.table_uri.rstrip("/") + "/"
    keys = [f.uri[len(root) :] for f in info.files]
    started = time.perf_counter()
    with ThreadPoolExecutor(8) as pool:
        sums = list(pool.map(lambda k: zlib.crc32(store.get(k)), keys))
    secs = time.perf_counter() - started
    size = sum(f.size for f in info.files)
    return (
        f"crc32 of (c)'s {len(sums)} files ({size / 2**20:.0f} MiB) read back on the driver: "
        f"{secs:.2f} s = {secs / job_s * 100:.0f}% of (c)'s best wall time"
    )


if __name__ == "__main__":
    main()
