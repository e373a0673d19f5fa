"""A Delta Lake transaction log mirroring a copy-on-write keyed table: a prototype, not product.

After each flowledger commit, one Delta commit (`_delta_log/N.json`, written by delta-rs) adds
the files the new snapshot reads and removes the ones it no longer does, so delta-rs (and any
Delta reader) reads the table's rows without flowledger. Measured per commit against the
plain commit: seconds, and objects written (each is one PUT on S3); then checked: delta-rs,
and DuckDB over delta-rs's file list, count exactly the table's rows after every commit.

    python -m bench delta_mirror [--backend minio|local] [--commits N] [--rows N] [--batch N]
"""

from __future__ import annotations

import io
import os
import statistics
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
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

from .common import BenchBackend, local_backend, minio_backend, table
from .s3_count_proxy import CountingProxy


def _objects(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def _schema(t: Table, files: list[str]) -> pa.Schema:
    return pa.unify_schemas([pq.read_schema(io.BytesIO(t.store.get(f))) for f in files])


class DeltaMirror:
    """Keeps `_delta_log/` under the table's folder in step with its snapshot."""

    def __init__(self, t: Table, uri: str, options: dict[str, str] | None, keep_open: bool) -> None:
        """`keep_open`: a long-lived writer keeps the Delta table's state between commits (a
        short-lived one, such as a CLI process, reads the log again each time)."""
        self.t, self.uri, self.options, self.keep_open = t, uri, options, keep_open
        self.table: DeltaTable | None = None
        self.current: dict[str, tuple[int, int]] = {}
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
        if self.schema is None:  # the bench's writes keep their columns: read it once
            self.schema = _schema(self.t, [a.path for a in adds])
        schema = DeltaSchema.from_arrow(self.schema)
        if not self.current:
            create_table_with_add_actions(
                self.uri, schema, adds, mode="error", storage_options=self.options
            )
        else:
            table = self.table or DeltaTable(self.uri, storage_options=self.options)
            table.create_write_transaction([*adds, *removes], "append", schema)
            if self.keep_open:
                table.update_incremental()  # to the version just written: it is the only writer
            self.table = table if self.keep_open else None
        self.current = now


def _batch(start: int, n: int, total: int, version: int) -> pa.Table:
    ids = [(start + i * 7919) % total for i in range(n)]
    return pa.table({"id": ids, "p": [i % 8 for i in ids], "v": [version] * n})


@dataclass
class Run:
    plain_s: list[float] = field(default_factory=list)
    mirror_s: list[float] = field(default_factory=list)
    plain_req: list[Counter[str]] = field(default_factory=list)
    mirror_req: list[Counter[str]] = field(default_factory=list)
    read_ok: bool = True
    rows: int = 0


def _delta_options(backend: BenchBackend, endpoint: str) -> dict[str, str] | None:
    if backend.name == "local":
        return None
    st = backend.settings
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": st.access_key_id or "",
        "AWS_SECRET_ACCESS_KEY": st.secret_access_key or "",
        "AWS_REGION": st.region or "us-east-1",
        "AWS_ALLOW_HTTP": "true",
        "AWS_CONDITIONAL_PUT": "etag",  # Delta's N.json create-only, as MinIO and S3 honour
    }


def _measure(backend: BenchBackend, commits: int, rows: int, batch: int, keep_open: bool) -> Run:
    run = Run()
    proxy = None
    settings = backend.settings
    if backend.name != "local":
        proxy = CountingProxy(str(settings.endpoint_url))
        settings = replace(settings, endpoint_url=proxy.endpoint)
    uri = backend.uri + ("/kept" if keep_open else "/reopened")
    root = Path(uri.removeprefix("file://"))
    options = _delta_options(backend, proxy.endpoint if proxy else "")

    def requests(step: Callable[[], object]) -> tuple[float, Counter[str]]:
        before = _objects(root) if proxy is None else set()
        t0, start = time.time(), time.perf_counter()
        step()
        took = time.perf_counter() - start
        if proxy is None:
            return took, Counter({"PUT": len(_objects(root) - before)})
        return took, Counter(proxy.between(t0, time.time() + 0.001).by_kind)

    try:
        t = Table.create(open_store(uri, settings), KeyedProperties.of("id", partition_by=("p",)))
        t.upsert(pa.table({"id": list(range(rows)), "p": [i % 8 for i in range(rows)],
                           "v": [0] * rows}))  # fmt: skip
        mirror = DeltaMirror(t, uri, options, keep_open)
        mirror.sync()
        for c in range(1, commits + 1):
            data = _batch(c * batch, batch, rows, c)
            took, req = requests(lambda: t.upsert(data))  # noqa: B023
            run.plain_s.append(took)
            run.plain_req.append(req)
            took, req = requests(mirror.sync)
            run.mirror_s.append(took)
            run.mirror_req.append(req)
            run.rows = t.snapshot().rows
            con = duckdb.connect()
            con.register("delta", DeltaTable(uri, storage_options=options).to_pyarrow_dataset())
            got = con.execute("SELECT count(*) FROM delta").fetchone()
            run.read_ok &= got is not None and got[0] == run.rows
    finally:
        if proxy is not None:
            proxy.stop()
    return run


def _median(counts: list[Counter[str]], kind: str) -> float:
    return statistics.median(c.get(kind, 0) for c in counts)


def main(argv: list[str] | None = None) -> None:
    args = argv or []

    def opt(name: str, default: str) -> str:
        return args[args.index(name) + 1] if name in args else default

    commits, rows = int(opt("--commits", "20")), int(opt("--rows", "200000"))
    batch, which = int(opt("--batch", "2000")), opt("--backend", "minio")
    backends = {"local": local_backend, "minio": minio_backend}
    with backends[which]() as backend:
        runs = {k: _measure(backend, commits, rows, batch, k) for k in (False, True)}
    out = table(
        f"Delta log mirror of a copy-on-write table: {commits} upserts of {batch:,} rows into "
        f"{rows:,} rows, 8 partitions, {which} (cpus={os.cpu_count()}, "
        f"load={os.getloadavg()[0]:.1f}); medians per commit",
        "step", "s", "s / plain", "PUT", "GET", "HEAD", "LIST",
    )  # fmt: skip
    for keep_open, run in runs.items():
        pm, mm = statistics.median(run.plain_s), statistics.median(run.mirror_s)
        how = "kept open" if keep_open else "read again per commit"
        steps = ((f"plain flowledger commit ({how} run)", pm, run.plain_req),
                 (f"+ Delta log commit, log {how}", mm, run.mirror_req))  # fmt: skip
        for name, secs, req in steps:
            kinds = [f"{_median(req, k):.0f}" for k in ("PUT", "GET", "HEAD", "LIST")]
            if which == "local":
                kinds[1:] = ["-", "-", "-"]
            out.add_row(name, f"{secs:.3f}", f"{secs / pm:.2f}", *kinds)
    console = Console(width=140)
    console.print(out)
    console.print(
        f"delta-rs, and DuckDB over delta-rs's Arrow dataset, read exactly the table's rows "
        f"({runs[True].rows:,}) after every commit: {all(r.read_ok for r in runs.values())}"
    )


if __name__ == "__main__":
    main()
