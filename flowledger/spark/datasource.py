"""The "flowledger" Spark data source (PySpark's Python Data Source API).

    df.write.format("flowledger").mode("append").option("partitionBy", "p").save(uri)
    spark.read.format("flowledger").option("asOf", "20260101000000000").load(uri)

Spark runs each step in a Python worker, never in the driver's own Python process:
`writer()` (planning) opens the instant and detaches from it (`timeline.PendingWrite`); each
task writes its Parquet files with a `timeline.TaskWriter` under the instant's data prefix and
returns their `DataFile`s; `commit(messages)` completes the instant with exactly those files
(`timeline.commit_files`); `abort` rolls it back.
What only the driver knows (s3a endpoint and credentials, application id, commit hooks) is
captured by `register(spark)` into the registered class, which Spark pickles to the workers.
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from storage import ObjectStore, StoreSettings, open_store
from timeline import (
    RECORD_KEY_COL,
    DataFile,
    FileSlice,
    PendingWrite,
    Table,
    TaskWriter,
    check_schema,
    commit_files,
    integer_key_column,
    latest_schema,
    read_footer,
    read_slice,
    read_verified,
    split_partitions,
)

from .arrow import arrow_schema
from .changes_reader import changes_reader, changes_request, changes_schema
from .commit_info import CommitHook, commit_hooks
from .committing import (
    commit_info,
    partition_columns,
    plan_write,
    run_hooks,
)
from .conf import conf_of, store_settings, table_settings
from .errors import SparkWriteError
from .keyed_options import keyed_options, requested_properties
from .paths import TablePath, resolve_repo_uri, table_path
from .worker_errors import one_line_refusals
from .writer_options import (
    BARE_KEYED,
    NAME,
    FilesWritten,
    gather,
)
from .writer_options import get_option as _option

#: Rows per data file a task writes before it starts the next one.
FILE_ROWS = 4_000_000


@dataclass(frozen=True)
class DriverFacts:
    """What the driver knew at `register`; pickled to the workers with the class."""

    store: StoreSettings
    conf: Mapping[str, str]
    app_id: str = ""
    app_name: str = ""
    user: str = ""
    hooks: tuple[CommitHook, ...] = ()


class FlowledgerDataSource(DataSource):
    facts = DriverFacts(StoreSettings(), {})

    @classmethod
    def name(cls) -> str:
        return NAME

    def _path(self) -> TablePath:
        uri = _option(self.options, "path")
        if not uri:
            raise SparkWriteError("the flowledger data source needs a table URI: .save(uri)")
        return table_path(uri)

    def _table(self, path: TablePath) -> Table:
        settings = table_settings(self.facts.conf, self.options)
        return Table.open(open_store(path.store_uri, self.facts.store), settings)

    def schema(self) -> StructType:
        with one_line_refusals():
            return self._schema()

    def reader(self, schema: StructType) -> DataSourceReader:
        with one_line_refusals():
            return self._reader(schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        with one_line_refusals():
            return self._writer(schema, overwrite)

    def _schema(self) -> StructType:
        from pyspark.sql.pandas.types import from_arrow_schema

        path = self._path()
        table = self._table(path)
        changes = changes_request(self.options)
        if changes is not None:
            return changes_schema(table, changes)
        as_of = _option(self.options, "asOf")
        snap = table.snapshot(as_of)
        files = snap.files
        if not files:
            raise SparkWriteError(
                f"table {path.given} has no committed data to read: write to it first, or "
                "check the URI"
            )
        merged = table.schema(as_of) if snap.merge_on_read_slices() is not None else None
        if merged is not None:  # logs may hold columns the first base file lacks
            arrow = merged
        else:
            arrow = read_footer(table.store, files[0].path, files[0].size).schema.to_arrow_schema()
        # Nullable everywhere: other files of the snapshot may hold nulls where this one has none.
        arrow = pa.schema([f.with_nullable(True) for f in arrow])
        return from_arrow_schema(arrow, prefer_timestamp_ntz=False)

    def _reader(self, schema: StructType) -> DataSourceReader:
        path = self._path()
        changes = changes_request(self.options)
        if changes is not None:
            return changes_reader(self._table(path), path, self.facts.store, changes)
        table = self._table(path)
        snap = table.snapshot(_option(self.options, "asOf"))
        slices = snap.merge_on_read_slices()
        if slices is not None:  # base files alone would miss the changes still in logs
            merged = table.schema(_option(self.options, "asOf"))
            key_col = integer_key_column(table.properties, merged)
            return MergedSliceReader(self.facts.store, path, slices, schema, merged, key_col)
        return SnapshotReader(self.facts.store, path, list(snap.files), schema)

    def _writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        path = self._path()
        if keyed_options(self.options) is not None or requested_properties(self.options):
            raise SparkWriteError(BARE_KEYED)
        parts = partition_columns(_option(self.options, "partitionBy"))
        missing = [c for c in parts if c not in schema.names]
        if missing:
            raise SparkWriteError(f"partition column(s) {missing} not in {schema.names}")
        action, operation = plan_write("overwrite" if overwrite else "append", parts)
        table = self._table(path)
        current = latest_schema(table, refresh=False)
        if current is not None and RECORD_KEY_COL in current.names:
            raise SparkWriteError(f"{path.given} is a keyed table: {BARE_KEYED}")
        naming = table.partition_naming() if parts else ""
        txn = table.begin(action, operation=operation)
        try:  # fail before any task runs if the data does not fit the table's schema
            txn.schema = check_schema(current, arrow_schema(schema))
        except BaseException:
            txn.abort()
            raise
        return TimelineWriter(
            facts=self.facts,
            path=path,
            parts=tuple(parts),
            naming=naming,
            # The commit worker (another process) completes or aborts it.
            pending=PendingWrite.detach(txn),
            repo_uri=resolve_repo_uri(_option(self.options, "repo"), self.facts.conf),
            options={str(k): str(v) for k, v in self.options.items()},
        )


@dataclass
class TimelineWriter(DataSourceArrowWriter):
    facts: DriverFacts
    path: TablePath
    parts: tuple[str, ...]
    #: The table's partition naming (`Table.partition_naming`), read on the driver.
    naming: str
    pending: PendingWrite
    repo_uri: str
    options: dict[str, str]

    # -- tasks ------------------------------------------------------------------------------------
    def write(self, iterator: Iterator[pa.RecordBatch]) -> FilesWritten:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        job = ""
        if ctx is not None:
            job = ctx.getLocalProperty("spark.job.description") or ""
            job = job or ctx.getLocalProperty("spark.jobGroup.id") or ""
        store = open_store(self.path.store_uri, self.facts.store)
        task = f"{ctx.partitionId():05d}-{ctx.taskAttemptId()}" if ctx else "0"
        # Guarded: a straggling attempt (speculative, or not yet killed when the job failed)
        # whose write was committed or aborted meanwhile deletes its file again.
        writer = TaskWriter(store, self.pending.target, task, guard=True)
        pending: dict[str, list[pa.Table]] = {}
        counts: dict[str, int] = {}
        out = FilesWritten(job=job)

        def flush(partition: str) -> None:
            pieces = pending.pop(partition, [])
            counts.pop(partition, None)
            if pieces:
                f = writer.write(pa.concat_tables(pieces), partition)
                if f is not None:
                    out.files.append(f)

        for batch in iterator:
            for partition, piece in split_partitions(
                pa.Table.from_batches([batch]), self.parts, naming=self.naming
            ):
                pending.setdefault(partition, []).append(piece)
                counts[partition] = counts.get(partition, 0) + piece.num_rows
                if counts[partition] >= FILE_ROWS:
                    flush(partition)
        for partition in list(pending):
            flush(partition)
        out.beat = writer.beat
        return out

    # -- commit worker -------------------------------------------------------------------------
    def _store(self) -> ObjectStore:
        return open_store(self.path.store_uri, self.facts.store)

    def commit(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        with one_line_refusals():  # a conflict with another writer, say
            self._commit(messages)

    def _commit(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        got = gather(self.facts, self.options, messages)
        txn = self.pending.resume(self._store(), table_settings(self.facts.conf, self.options))
        # Files of failed or speculative task attempts are in no message: the sweep deletes
        # them, so the instant's prefix holds exactly what it commits.
        instant = commit_files(
            txn, got.files, extra_metadata=got.metadata, sweep=True, heartbeat_written=got.beat
        )
        info = commit_info(
            self.path, instant, self.pending.operation, got.files, got.job, self.repo_uri
        )
        run_hooks(info, self.facts.hooks)

    def abort(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        # Spark also aborts after a failed commit(): if the completion reached the commit log
        # (an unknown outcome that did land), its files stay.
        self.pending.abort(self._store(), table_settings(self.facts.conf, self.options))


class SnapshotReader(DataSourceReader):
    """One partition per committed file; each read whole with flowledger's store, checked
    against the crc32 its commit recorded (the bytes are in memory anyway, so the check costs
    one pass of zlib over them), then decoded with pyarrow."""

    def __init__(
        self, store: StoreSettings, path: TablePath, files: list[DataFile], schema: StructType
    ) -> None:
        self.store = store
        self.path = path
        self.files = files
        self.names = list(schema.names)

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(f.to_json()) for f in self.files]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        store = open_store(self.path.store_uri, self.store)
        f = DataFile.from_json(partition.value)
        data = pq.read_table(io.BytesIO(read_verified(store, f)))
        columns = [
            data.column(n) if n in data.column_names else pa.nulls(data.num_rows)
            for n in self.names
        ]
        yield from pa.table(columns, names=self.names).to_batches()


class MergedSliceReader(DataSourceReader):
    """A merge-on-read snapshot: one partition per file slice, whose base and logs are
    merged by the executor that reads it (the timeline's `read_slice`: checksums verified,
    the table's merge mode applied), never on the driver."""

    def __init__(
        self,
        store: StoreSettings,
        path: TablePath,
        slices: list[FileSlice],
        schema: StructType,
        table_schema: pa.Schema | None,
        key_col: str | None = None,
    ) -> None:
        self.store = store
        self.path = path
        self.slices = slices
        self.names = list(schema.names)
        self.table_schema = table_schema
        self.key_col = key_col  # the single integer record key: keys matched as numbers

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(sl) for sl in self.slices]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        store = open_store(self.path.store_uri, self.store)
        data = read_slice(store, partition.value, self.table_schema, key_col=self.key_col)
        columns = [
            data.column(n) if n in data.column_names else pa.nulls(data.num_rows)
            for n in self.names
        ]
        yield from pa.table(columns, names=self.names).to_batches()


def _picklable(hooks: Sequence[CommitHook]) -> tuple[CommitHook, ...]:
    import logging

    from pyspark import cloudpickle

    ok = []
    for hook in hooks:
        try:
            cloudpickle.dumps(hook)  # type: ignore[no-untyped-call]
            ok.append(hook)
        except Exception as exc:
            logging.getLogger(__name__).warning(
                "flowledger: commit hook %r cannot be sent to Spark's Python workers, so the "
                "data source will not run it (the native flowledger.spark.write does): %s",
                hook,
                exc,
            )
    return tuple(ok)


def _install_provenance(spark: Any, settings: StoreSettings) -> None:
    """The provenance recorder's hook, when that half of the integration is installed."""
    from .lineage import install

    install(spark, settings)


def register(spark: Any) -> None:
    """Register the "flowledger" data source on `spark` (again after adding commit hooks)."""
    conf = conf_of(spark)
    sc = spark.sparkContext
    _install_provenance(spark, store_settings(conf))
    facts = DriverFacts(
        store=store_settings(conf),
        conf={k: v for k, v in conf.items() if k.startswith("spark.flowledger.")},
        app_id=str(sc.applicationId),
        app_name=str(sc.appName),
        user=str(sc.sparkUser()),
        hooks=_picklable(commit_hooks(spark)),
    )
    # A class of its own per registration, so Spark pickles it by value with these facts.
    cls = type("FlowledgerDataSource", (FlowledgerDataSource,), {"facts": facts})
    spark.dataSource.register(cls)
    setattr(spark, _REGISTERED, True)


#: Attribute marking a session `register` ran on: the mark lives and dies with the session
#: (`flowledger.spark.save` registers the rest).
_REGISTERED = "_flowledger_data_source_registered"


def ensure_registered(spark: Any) -> None:
    """Register the data source on `spark` unless it already was."""
    if not getattr(spark, _REGISTERED, False):
        register(spark)
