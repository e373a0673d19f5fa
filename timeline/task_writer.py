"""The task side of a write an engine distributes: data files of one pending instant, written
from any process (a Spark executor's Python worker) and described as picklable `DataFile`s.

The driver begins the instant and hands each task a `WriteTarget` (plain data, no store, no
thread). A task opens its own store and a `TaskWriter`; each `write` uploads one Parquet file
under the instant's data prefix and returns the file's `DataFile` (size, rows, column
statistics from the footer, crc32 of the bytes). The tasks send those to the driver, which
commits exactly them (`engine_commit.commit_files`): a file no description names is never read
and is deleted by the commit's sweep or the instant's rollback.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

from storage import ObjectStore

from .file_stats import describe_bytes
from .heartbeat import beat
from .instant import parse_time
from .instant_states import InstantStates
from .layout import data_key, data_prefix
from .metadata import DataFile
from .parquet_io import DEFAULT_CODEC, to_parquet_bytes
from .partitioning import split_partitions

if TYPE_CHECKING:
    from .txn import Transaction


@dataclass(frozen=True)
class WriteTarget:
    """What a task needs to add data files to one pending instant (picklable)."""

    instant_time: str
    #: The id the instant's writer heartbeats with.
    writer_id: str
    #: A task of a write older than this refreshes the instant's heartbeat after each file,
    #: so other writers do not take a long write for a failed one (LAZY policy).
    heartbeat_interval_s: float
    #: The data files' compression (pyarrow's name of the table's
    #: `parquet_compression_codec`).
    codec: str = DEFAULT_CODEC

    @staticmethod
    def of(txn: Transaction) -> WriteTarget:
        settings = txn.table.settings
        return WriteTarget(
            txn.instant_time,
            settings.writer_id,
            settings.heartbeat_interval_ms / 1000.0,
            settings.parquet_compression_codec.arrow,
        )

    @property
    def data_prefix(self) -> str:
        """Every data file of the instant lives under this prefix (relative to the table)."""
        return data_prefix(self.instant_time)


class TaskWriter:
    """Writes Parquet data files of one pending instant; see the module docstring.

    `task` makes file names unique per task attempt (two attempts of one task must never
    write the same key: one of them may be the attempt the driver commits). With `guard`,
    each file is checked after its upload against the instant's state (one short LIST): if
    the write was completed or rolled back meanwhile (a straggling or speculative attempt),
    the file is deleted again and `write` returns None.
    """

    def __init__(
        self, store: ObjectStore, target: WriteTarget, task: str = "0", *, guard: bool = True
    ) -> None:
        self.store = store
        self.target = target
        self.task = task
        self.guard = guard
        #: Whether this writer wrote a heartbeat object (the committer then deletes it).
        self.beat = False
        self._seq = 0

    def write(
        self, data: pa.Table, partition: str = "", *, file_group: str = "", name: str = ""
    ) -> DataFile | None:
        """Upload `data` as one Parquet file of partition `partition` and describe it."""
        body = to_parquet_bytes(data, self.target.codec)
        return self.write_body(body, partition, file_group=file_group, name=name)

    def write_body(
        self, body: bytes, partition: str = "", *, file_group: str = "", name: str = ""
    ) -> DataFile | None:
        """Upload `body`, an encoded Parquet file, as `write` uploads what it encodes."""
        if not name:
            name = f"{self.task}-{self._seq:04d}_{self.target.instant_time}.parquet"
            self._seq += 1
        key = data_key(self.target.instant_time, partition, name)
        self.store.put(key, body)
        if self.guard and not self.still_pending():
            self.store.delete(key)
            return None
        f = describe_bytes(key, body, partition, file_group)
        self.beat_if_due()
        return f

    def write_partitions(
        self, data: pa.Table, partition_by: Sequence[str], *, naming: str
    ) -> list[DataFile]:
        """One file per Hive-style partition of `data` (see partitioning.py), named by the
        table's partition naming (`Table.partition_naming()`, read where the write began)."""
        out = []
        for partition, piece in split_partitions(data, partition_by, naming=naming):
            f = self.write(piece, partition)
            if f is not None:
                out.append(f)
        return out

    def still_pending(self) -> bool:
        """The instant is neither completed nor rolled back (one short LIST)."""
        states = InstantStates(self.store).of_time(self.target.instant_time)
        return bool(states) and all(i.is_pending for i in states)

    def beat_if_due(self) -> bool:
        """Refresh the instant's heartbeat once the write is older than the heartbeat
        interval: the state objects count as the first beat, so short writes never write one."""
        age = time.time() - parse_time(self.target.instant_time).timestamp()
        if age < self.target.heartbeat_interval_s:
            return False
        beat(self.store, self.target.instant_time, self.target.writer_id)
        self.beat = True
        return True
