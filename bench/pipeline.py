"""The NYC flights pipeline with and without provenance recording, on the local FS and MinIO.

Baseline (same run, same Spark session, after an unmeasured warm-up run): the pipeline with
`record_provenance=False` (no content landing, no sessions, no rollover/lineage/replay; Spark
reads the raw files from disk). Reported: wall time and its ratio to the baseline (goal <=
1.10), provenance events and flowledger's own object requests per million input rows (Spark's
s3a/file I/O is not counted: it is the same in both modes).

`python -m bench pipeline [--quick]` (--quick: 50,000 flights, local FS only).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console

from bench.common import console, minio_backend, table
from flowledger.pipeline import PipelineOptions, PipelineResult, run_pipeline
from flowledger.pipeline import tables as tbl


@contextmanager
def _env(settings: Any) -> Iterator[None]:
    """The AWS variables the pipeline (and Spark's s3a) read, pointing at the MinIO."""
    names = {
        "AWS_ENDPOINT_URL": settings.endpoint_url,
        "AWS_ACCESS_KEY_ID": settings.access_key_id,
        "AWS_SECRET_ACCESS_KEY": settings.secret_access_key,
        "AWS_REGION": settings.region,
    }
    old = {k: os.environ.get(k) for k in names}
    os.environ.update({k: v for k, v in names.items() if v})
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _once(repo: str, spark: Any, sample: int | None, provenance: bool) -> PipelineResult:
    quiet = Console(file=open(os.devnull, "w"))  # noqa: SIM115 - closed with the run
    try:
        return run_pipeline(PipelineOptions(repo, None, sample, provenance), quiet, spark=spark)
    finally:
        quiet.file.close()


def _measure(name: str, repo_of: Any, spark: Any, sample: int | None) -> list[tuple[str, ...]]:
    rows = []
    # Warm up the JVM, Spark's code paths and (on MinIO) s3a, so the baseline is not the run
    # that pays for them.
    _once(repo_of("warmup"), spark, 20_000, True)
    base = _once(repo_of("base"), spark, sample, False)
    prov = _once(repo_of("prov"), spark, sample, True)
    input_rows = sum(prov.input_rows.values())
    per_m = 1_000_000 / input_rows
    for label, r in (("without provenance", base), ("with provenance", prov)):
        reqs = sum(r.store_requests.values())
        rows.append(
            (
                name,
                label,
                f"{input_rows:,}",
                f"{r.wall_seconds:.1f}",
                f"{r.wall_seconds / base.wall_seconds:.2f}",
                f"{r.events_recorded:,}",
                f"{r.events_recorded * per_m:,.1f}",
                f"{reqs:,}",
                f"{reqs * per_m:,.1f}",
            )
        )
    stages = ", ".join(
        f"{k.split(' (')[0]} {base.stage_seconds.get(k, 0.0):.1f}->{v:.1f}s"
        for k, v in prov.stage_seconds.items()
        if v >= 1.0
    )
    console.print(f"{name}: stage seconds without -> with provenance: {stages}")
    return rows


def main(args: list[str]) -> None:
    quick = "--quick" in args
    sample = 50_000 if quick else None
    out: list[tuple[str, ...]] = []
    with tempfile.TemporaryDirectory(prefix="flowledger-bench-pipeline-") as tmp:
        if quick:
            spark = tbl.session(str(Path(tmp) / "repo"), None)
            try:
                out += _measure("local FS", lambda m: str(Path(tmp) / m), spark, sample)
            finally:
                spark.stop()
        else:
            with minio_backend("pipeline") as mb, _env(mb.settings):
                spark = tbl.session(mb.uri, None)
                try:
                    out += _measure("local FS", lambda m: str(Path(tmp) / m), spark, sample)
                    out += _measure("MinIO", lambda m: f"{mb.uri}/{m}", spark, sample)
                finally:
                    spark.stop()
    t = table(
        "NYC flights pipeline: provenance overhead (same Spark session, baseline first)",
        "backend",
        "mode",
        "input rows",
        "wall s",
        "x baseline",
        "events",
        "events / M rows",
        "requests",
        "requests / M rows",
    )
    for row in out:
        t.add_row(*row)
    console.print(t)


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
