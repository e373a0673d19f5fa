"""The upsert benchmark's in-Python systems, each run in its own process by `bench/upsert.py`:

    python -m bench.upsert_systems SYSTEM INPUTS_JSON OUT_JSON WORKDIR

SYSTEM is `flowledger`, `iceberg` (pyiceberg, SQL catalog on SQLite in WORKDIR) or `delta`
(delta-rs). Storage is reached through the standard AWS variables (the orchestrator points
them at its counting proxy); every system writes to its own bucket named after it. Each adapter
uses the system's own documented way to do the operation; inputs are read from local Parquet
before a step's clock starts.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.parquet as pq

from bench.upsert_data import Inputs
from bench.upsert_probe import Recorder


class NotAvailable(RuntimeError):
    """The system cannot run here (missing package or feature); the message says why."""


class System(Protocol):
    def create(self, first: Any) -> dict[str, Any]: ...
    def append(self, data: Any) -> dict[str, Any]: ...
    def upsert(self, data: pa.Table) -> dict[str, Any]: ...
    def delete(self, keys: pa.Table) -> dict[str, Any]: ...
    def count(self) -> int: ...


def _env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise NotAvailable(f"{name} is not set")
    return value


# --- pyiceberg ---------------------------------------------------------------------------------


class Iceberg:
    """pyiceberg `Table.upsert(df, join_cols=["id"])`, `delete(In("id", keys))`, `append`;
    SQL catalog on SQLite, warehouse on S3 through pyarrow's S3FileSystem. `append` takes a
    table only (no record-batch reader), so its load inputs are read whole."""

    def __init__(self, workdir: Path) -> None:
        try:
            from pyiceberg.catalog.sql import SqlCatalog
        except ImportError as exc:
            raise NotAvailable("pyiceberg is not installed: pip install '.[bench]'") from exc
        self.catalog = SqlCatalog(
            "bench",
            uri=f"sqlite:///{workdir / 'iceberg-catalog.db'}",
            warehouse="s3://iceberg/warehouse",
            **{
                "py-io-impl": "pyiceberg.io.pyarrow.PyArrowFileIO",
                "s3.endpoint": _env("AWS_ENDPOINT_URL"),
                "s3.access-key-id": _env("AWS_ACCESS_KEY_ID"),
                "s3.secret-access-key": _env("AWS_SECRET_ACCESS_KEY"),
                "s3.region": os.environ.get("AWS_REGION", "us-east-1"),
                "s3.force-virtual-addressing": "false",
            },
        )
        self.table: Any = None

    def create(self, first: pa.Table) -> dict[str, Any]:
        self.catalog.create_namespace_if_not_exists("bench")
        self.table = self.catalog.create_table("bench.t", schema=first.schema)
        with self.table.update_spec() as spec:
            spec.add_identity("part")
        return self.append(first)

    def append(self, data: pa.Table) -> dict[str, Any]:
        self.table.append(data)
        return {}

    def upsert(self, data: pa.Table) -> dict[str, Any]:
        res = self.table.upsert(data, join_cols=["id"])
        return {"updated": res.rows_updated, "inserted": res.rows_inserted}

    def delete(self, keys: pa.Table) -> dict[str, Any]:
        from pyiceberg.expressions import In

        self.table.delete(In("id", keys.column("id").to_pylist()))
        return {}

    def count(self) -> int:
        self.table.refresh()
        return int(self.table.scan().count())


# --- delta-rs ----------------------------------------------------------------------------------


class Delta:
    """delta-rs `merge` (when_matched_update_all / when_not_matched_insert_all; deletes as
    when_matched_delete), appends with `write_deltalake`. Commits use conditional PUT
    (`aws_conditional_put=etag`), which MinIO supports: the safe mode, no unsafe rename."""

    URI = "s3://delta/t"
    takes_stream = True  # write_deltalake takes a RecordBatchReader

    def __init__(self, workdir: Path) -> None:
        try:
            import deltalake
        except ImportError as exc:
            raise NotAvailable("deltalake is not installed: pip install '.[bench]'") from exc
        self.dl = deltalake
        self.options = {
            "AWS_ENDPOINT_URL": _env("AWS_ENDPOINT_URL"),
            "AWS_ACCESS_KEY_ID": _env("AWS_ACCESS_KEY_ID"),
            "AWS_SECRET_ACCESS_KEY": _env("AWS_SECRET_ACCESS_KEY"),
            "AWS_REGION": os.environ.get("AWS_REGION", "us-east-1"),
            "AWS_ALLOW_HTTP": "true",
            "AWS_CONDITIONAL_PUT": "etag",
        }

    def _table(self) -> Any:
        return self.dl.DeltaTable(self.URI, storage_options=self.options)

    def create(self, first: Any) -> dict[str, Any]:
        self.dl.write_deltalake(
            self.URI, first, partition_by=["part"], mode="append", storage_options=self.options
        )
        return {}

    def append(self, data: Any) -> dict[str, Any]:
        self.dl.write_deltalake(self.URI, data, mode="append", storage_options=self.options)
        return {}

    def _merge(self, source: pa.Table) -> Any:
        # The partition in the predicate as well: Delta's documented way to let a merge prune.
        return self._table().merge(
            source=source,
            predicate="t.id = s.id AND t.part = s.part",
            source_alias="s",
            target_alias="t",
        )

    @staticmethod
    def _metrics(m: dict[str, Any]) -> dict[str, Any]:
        keep = ("num_target_rows_updated", "num_target_rows_inserted", "num_target_rows_deleted",
                "num_target_rows_copied", "num_target_files_scanned", "num_target_files_added",
                "num_target_files_removed", "scan_time_ms", "rewrite_time_ms")  # fmt: skip
        out = {k: m[k] for k in keep if k in m}
        if "scan_time_ms" in m:
            out["index_ms"] = m["scan_time_ms"]  # finding the target rows that match
        return out

    def upsert(self, data: pa.Table) -> dict[str, Any]:
        return self._metrics(
            self._merge(data).when_matched_update_all().when_not_matched_insert_all().execute()
        )

    def delete(self, keys: pa.Table) -> dict[str, Any]:
        return self._metrics(self._merge(keys).when_matched_delete().execute())

    def count(self) -> int:
        return int(self._table().to_pyarrow_dataset().count_rows())


# --- flowledger --------------------------------------------------------------------------------


class Flowledger:
    """flowledger's Python path: a keyed copy-on-write table (record key `id`, ordering field
    `ts`, partition `part`; key scope from FLOWLEDGER_KEY_SCOPE, the table default when unset),
    `Table.upsert(arrow_table)`, `Table.delete(keys)`, `Table.insert(arrow_table)`."""

    URI = "s3://flowledger/t"
    takes_stream = True  # Table.insert takes a RecordBatchReader

    def __init__(self, workdir: Path) -> None:
        from storage import StoreSettings, open_store
        from timeline import Table

        missing = [m for m in ("create", "upsert", "delete", "insert") if not hasattr(Table, m)]
        if missing:
            raise NotAvailable(
                f"timeline.Table has no {' / '.join(missing)} yet: keyed tables are not merged"
            )
        self.store = open_store(self.URI, StoreSettings())
        self.Table = Table
        self.table: Any = None
        self.index_s = 0.0
        self._time_index_lookups()

    def _time_index_lookups(self) -> None:
        """flowledger does not report its lookup time: the bench times the index seam (the
        writer asks `candidates()` which files may hold the incoming keys, after dropping the
        keys beyond every file's range with `in_some_range()`)."""
        try:
            from timeline.keyed.index.ranges import RangeBloomIndex
        except ImportError:
            return
        outer = self

        def timing(lookup: Any) -> Any:
            def timed(self: Any, *args: Any, **kwargs: Any) -> Any:
                t0 = time.perf_counter()
                try:
                    return lookup(self, *args, **kwargs)
                finally:
                    outer.index_s += time.perf_counter() - t0

            return timed

        RangeBloomIndex.candidates = timing(RangeBloomIndex.candidates)  # type: ignore[method-assign]
        RangeBloomIndex.in_some_range = timing(RangeBloomIndex.in_some_range)  # type: ignore[method-assign]

    def _op(self, fn: Any, data: Any) -> dict[str, Any]:
        self.index_s = 0.0
        out = {"instant": fn(data).time}
        out["index_ms"] = self.index_s * 1000
        return out

    def create(self, first: Any) -> dict[str, Any]:
        from timeline.keyed import KeyedProperties

        scope = os.environ.get("FLOWLEDGER_KEY_SCOPE")
        options = {"key_scope": scope} if scope else {}
        props = KeyedProperties.of("id", ordering_field="ts", partition_by="part", **options)
        self.table = self.Table.create(self.store, props)
        return self.append(first)

    def append(self, data: Any) -> dict[str, Any]:
        return self._op(self.table.insert, data)

    def upsert(self, data: pa.Table) -> dict[str, Any]:
        return self._op(self.table.upsert, data)

    def delete(self, keys: pa.Table) -> dict[str, Any]:
        return self._op(self.table.delete, keys)

    def describe(self, step: dict[str, Any]) -> dict[str, Any]:
        """What the commit recorded about the step (read after its clock stopped)."""
        instant = step.get("instant")
        if not instant:
            return {}
        keyed = self.table.entry(instant).metadata.get("keyed") or {}
        out = {k: v for k, v in keyed.items() if k != "properties"}
        for name in ("index_ms", "lookup_ms", "index_lookup_ms"):
            if name in keyed:
                out["index_ms"] = keyed[name]
        return out

    def count(self) -> int:
        return int(self.table.read(columns=["id"]).num_rows)

    def info(self) -> dict[str, str]:
        props = self.table.properties
        return {"key scope": props.key_scope, "merge mode": props.merge_mode}


SYSTEMS = {"iceberg": Iceberg, "delta": Delta, "flowledger": Flowledger}


def _drop_inputs() -> None:
    """Return the freed pages of the bench's own inputs (read into Arrow's pool) to the OS
    before the next step's peak is reset: they are not the system's memory."""
    pa.default_memory_pool().release_unused()


def row_groups(path: str) -> pa.RecordBatchReader:
    """A load input as a stream of its row groups, read as the system consumes it."""
    pf = pq.ParquetFile(path)
    batches = (b for i in range(pf.num_row_groups) for b in pf.read_row_group(i).to_batches())
    return pa.RecordBatchReader.from_batches(pf.schema_arrow, batches)


def _load_input(system: System, path: str) -> pa.Table | pa.RecordBatchReader:
    """What a load commit is fed: a stream of the file's row groups to a system that takes
    one (`takes_stream`), else the file read whole before the clock starts."""
    return row_groups(path) if getattr(system, "takes_stream", False) else pq.read_table(path)


def run(system: System, inputs: Inputs, rec: Recorder) -> None:
    loads = inputs.loads
    first = _load_input(system, loads[0].path)
    with rec.step("load") as extra:
        # The whole base table, one commit per load batch; `seconds` leaves out the reads of
        # the local input files between commits, but a stream is read as it is written.
        t0 = time.perf_counter()
        extra.update(system.create(first))
        spent = time.perf_counter() - t0
        # The bench's own inputs are dropped once written: held, they would count in every
        # later step's peak (the first load batch is a tenth of the table).
        del first
        _drop_inputs()
        for step in loads[1:]:
            data = _load_input(system, step.path)
            t0 = time.perf_counter()
            got = system.append(data)
            spent += time.perf_counter() - t0
            del data
            _drop_inputs()
            if "index_ms" in got:
                extra["index_ms"] = extra.get("index_ms", 0.0) + got["index_ms"]
        extra["seconds"] = spent
        extra.pop("instant", None)  # the first load commit's only
    ops = {"upsert": system.upsert, "delete": system.delete, "append": system.append}
    describe = getattr(system, "describe", None)
    for step in inputs.steps:
        data = pq.read_table(step.path)
        with rec.step(step.name) as extra:
            extra.update(ops[step.kind](data))
        del data
        _drop_inputs()
        if describe is not None:
            rec.annotate(describe(rec.result["steps"][-1]))
    with rec.step("count") as extra:
        extra["rows"] = system.count()
    info = getattr(system, "info", None)
    if info is not None:
        rec.result["info"].update(info())
        rec.save()


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    name, inputs_json, out_json, workdir = args
    rec = Recorder(name, Path(out_json))
    try:
        system = SYSTEMS[name](Path(workdir))
    except NotAvailable as exc:
        rec.result["unavailable"] = str(exc)
        rec.save()
        return
    rec.result["info"] = _versions(name)
    run(system, Inputs.load(Path(inputs_json)), rec)


def _versions(name: str) -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    pkg = {"iceberg": "pyiceberg", "delta": "deltalake", "flowledger": "flowledger"}[name]
    try:
        return {pkg: version(pkg)}
    except PackageNotFoundError:
        return {}


if __name__ == "__main__":
    main()
