"""The driver side of a write an engine ran: commit the data files it wrote as one instant.

What delta-rs calls committing *add actions*: an engine (Spark's JVM Parquet writer, or tasks
with a `TaskWriter`) has put Parquet files under a pending instant's data prefix; the driver
holds one `DataFile` per file (from the tasks, or from the files' footers: `describe_files`)
and `commit_files` adds exactly those to the transaction, replaces what the operation
overwrites, and completes the instant. Failed, speculative and straggling task attempts may
leave files no description names: with `sweep`, the prefix is cleared of them before the
completion and once more after it.

When planning and committing run in different processes (PySpark's Python data source plans
in one worker and commits in another), the planner `PendingWrite.detach`es the transaction and
the committer `resume`s it from that picklable handle.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from storage import ObjectInfo, ObjectStore

from .file_stats import describe_stored
from .instant import Instant
from .layout import data_prefix, heartbeat_key
from .metadata import DataFile
from .parquet_io import DEFAULT_CODEC
from .settings import TableSettings
from .task_writer import WriteTarget

if TYPE_CHECKING:
    import pyarrow as pa

    from .txn import Transaction

#: Footers (and checksums) of engine-written files read at once.
DESCRIBE_PARALLELISM = 16


@dataclass(frozen=True)
class PendingWrite:
    """A begun instant left pending for another process to complete or abort (picklable)."""

    instant_time: str
    action: str
    base: int
    operation: str
    writer_id: str
    heartbeat_interval_s: float
    #: The table's schema after this write (checked by the planner), recorded at commit.
    schema: pa.Schema | None = None
    #: The data files' compression (`WriteTarget.codec`).
    codec: str = DEFAULT_CODEC

    @staticmethod
    def detach(txn: Transaction) -> PendingWrite:
        """Stop `txn`'s heartbeat thread and describe it for the process that finishes it."""
        txn.detach()
        target = WriteTarget.of(txn)
        return PendingWrite(
            txn.instant_time,
            txn.action,
            txn.base,
            txn.operation,
            target.writer_id,
            target.heartbeat_interval_s,
            txn.schema,
            target.codec,
        )

    @property
    def target(self) -> WriteTarget:
        """What the tasks write with."""
        return WriteTarget(self.instant_time, self.writer_id, self.heartbeat_interval_s, self.codec)

    def resume(self, store: ObjectStore, settings: TableSettings | None = None) -> Transaction:
        """The transaction again, on a table opened here under the planner's writer id."""
        from .table import Table
        from .txn import Transaction

        settings = replace(settings or TableSettings(), writer_id=self.writer_id)
        txn = Transaction(
            Table.open(store, settings), self.instant_time, self.action, self.base, self.operation
        )
        txn.schema = self.schema
        return txn

    def abort(self, store: ObjectStore, settings: TableSettings | None = None) -> bool:
        """Roll the write back, unless its completion reached the commit log (an unknown
        outcome that did land: then its files stay). Returns whether it was rolled back."""
        txn = self.resume(store, settings)
        if txn.table.timeline().completed().get(self.instant_time) is not None:
            txn.detach()
            return False
        txn.abort()
        sweep_strays(store, self.instant_time, keep=())
        return True


def describe_files(
    store: ObjectStore, objects: Sequence[ObjectInfo], *, checksums: bool = True
) -> list[DataFile]:
    """`DataFile`s (no partition, no file group) of Parquet files an engine wrote, in their
    order: rows and statistics from each footer (one ranged GET), and with `checksums` the
    crc32 of every byte read back once (readers verify it), many files in parallel."""

    def one(info: ObjectInfo) -> DataFile:
        return describe_stored(store, info.key, info.size, checksum=checksums)

    if len(objects) <= 1:
        return [one(o) for o in objects]
    with ThreadPoolExecutor(min(DESCRIBE_PARALLELISM, len(objects)), "flowledger-describe") as pool:
        return list(pool.map(one, objects))


def sweep_strays(store: ObjectStore, instant_time: str, keep: Iterable[str]) -> list[str]:
    """Delete the objects under the instant's data prefix that `keep` does not name (one LIST
    of that prefix only); returns their keys."""
    kept = set(keep)
    found = [o.key for o in store.list(data_prefix(instant_time)) if o.key not in kept]
    store.delete_many(found)
    return found


def commit_files(
    txn: Transaction,
    files: Iterable[DataFile],
    *,
    replaced: Iterable[str | DataFile] = (),
    extra_metadata: Mapping[str, str] | None = None,
    sweep: bool = False,
    heartbeat_written: bool = False,
) -> Instant:
    """Complete `txn` with exactly `files` (each under its data prefix).

    The transaction's operation says what it overwrites: `insert_overwrite` replaces the
    partitions `files` fall in, `insert_overwrite_table` every partition of the snapshot;
    `replaced` names further files of the snapshot it supersedes (a replacecommit). With
    `sweep`, unnamed objects under the instant's prefix are deleted before and after the
    completion. `heartbeat_written`: a task wrote the instant's heartbeat object, deleted
    after the completion. A failure before the completion aborts the write; a conflict rolls
    it back and raises `CommitConflict`; an unknown outcome leaves it pending for recovery.
    """
    files = list(files)
    store = txn.table.store
    keep = {f.path for f in files}
    try:
        if sweep:
            sweep_strays(store, txn.instant_time, keep)
        txn.add(*files)
        if txn.operation in ("insert_overwrite", "insert_overwrite_table"):
            touched = {f.partition for f in files}
            if txn.operation == "insert_overwrite_table":
                touched |= {f.partition for f in txn.table.snapshot().files}
            txn.replace_partitions(touched)
        replaced = list(replaced)
        if replaced:
            txn.replace(replaced)
    except BaseException:
        txn.abort()
        raise
    # Outside the abort above: a conflict rolls the instant back itself, and an unknown
    # outcome (the log PUT may have landed) must stay pending for recovery to decide.
    instant = txn.commit(extra_metadata)
    if sweep:  # attempts that uploaded while the completion ran
        sweep_strays(store, txn.instant_time, keep)
    if heartbeat_written:
        store.delete(heartbeat_key(txn.instant_time))
    return instant
