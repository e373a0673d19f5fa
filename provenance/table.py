"""The provenance table on the timeline: merged files are committed, expired files replaced
and cleaned. The only module that talks to `timeline`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from storage import ObjectStore
from storage.timeutil import datetime_to_ms
from timeline import (
    CommitConflict,
    DataFile,
    Table,
    TableSettings,
    TableState,
    Transaction,
    data_instant_time,
    parse_time,
)

from . import crash
from .catalog import NO_SUMS, EventFile, Sums, event_files
from .errors import ProvenanceConflict
from .layout import EVENTS_PARTITION, INDEX_PARTITION, TABLE, file_name

HIGH_WATER = "provenance.high_water"


@dataclass(frozen=True)
class MergedFile:
    """One merged events file and its term index, written but not yet committed."""

    first_id: int
    events_key: str
    index_key: str
    events_size: int
    index_size: int
    rows: int
    stats: dict[str, dict[str, int]]
    events_sums: Sums = NO_SUMS
    index_sums: Sums = NO_SUMS


def write_merged_file(
    table_store: ObjectStore, events_key: str, index_key: str, events: bytes, index: bytes
) -> None:
    """Write a merged file pair, create-only; invisible until the rollover instant completes."""
    table_store.put_if_absent(events_key, events)
    crash.point("provenance.rollover.events_written")
    table_store.put_if_absent(index_key, index)
    crash.point("provenance.rollover.index_written")


@dataclass(frozen=True)
class Committed:
    files: tuple[EventFile, ...]
    high_water: int


def instant_ms(key: str) -> int | None:
    """The rollover time of a merged file: its instant time, part of its data key."""
    t = data_instant_time(key)
    return None if t is None else datetime_to_ms(parse_time(t))


class ProvenanceTable:
    def __init__(self, store: ObjectStore, settings: TableSettings | None = None) -> None:
        self._store = store
        self._prefix = TABLE + "/"
        self.table = Table(store.scoped(TABLE), settings)  # read by `load()`: no I/O here
        self._cached: tuple[int, Committed] | None = None

    def load(self) -> None:
        """Read the timeline (what `Table.open` does); `ProvenanceRepository.open` calls it."""
        self.table.refresh()

    def invalidate(self) -> None:
        self._cached = None

    def known_high_water(self) -> int | None:
        """The high-water mark last read (None before the first read); may be stale."""
        cached = self._cached
        return None if cached is None else cached[1].high_water

    def recover(self) -> list[str]:
        """Roll back failed rollovers (expired heartbeats) and finish pending table services."""
        done = self.table.maintenance.recover()
        self.invalidate()
        return done

    def committed(self, fresh: bool = False) -> Committed:
        """Committed files and the high-water mark (ids below it are merged or expired).

        Reloading the timeline costs two LISTs and a GET per new completion. Every
        completion takes the next position of the timeline's commit log, so when nothing
        completed since `seq`, the state read at `seq` is still current: one HEAD.
        """
        if not fresh and self._cached is not None:
            seq, committed = self._cached
            if not self.table.instants.changed_since(seq):
                return committed
        state = self.table.state()
        seq = max((e.seq for e in state.entries), default=0)
        committed = self._load(state)
        self._cached = (seq, committed)
        return committed

    def _load(self, state: TableState) -> Committed:
        files = event_files(state.snapshot().files, self._prefix)
        high = max((f.end_id for f in files), default=0)
        # Recorded in every commit, so it survives the expiry of every file.
        for entry in state.entries:
            value = entry.extra.get(HIGH_WATER)
            if value is not None:
                high = max(high, int(value))
        return Committed(files, high)

    def commit_rollover(
        self,
        first_id: int,
        end_id: int,
        events: bytes,
        index: bytes,
        stats: dict[str, dict[str, int]],
        rows: int,
        journals: int,
    ) -> None:
        """Write both files of one rollover and commit them as one instant."""
        txn = self.table.begin(action="commit")
        try:
            ekey, ikey = self.file_keys(txn, first_id)
            write_merged_file(self._store.scoped(TABLE), ekey, ikey, events, index)
            merged = MergedFile(
                first_id, ekey, ikey, len(events), len(index), rows, stats,
                Sums.of_bytes(events), Sums.of_bytes(index),
            )  # fmt: skip
            self.finish_rollover(txn, [merged], end_id, journals)
        except ProvenanceConflict:
            raise  # the timeline already rolled the losing write back
        except BaseException:
            txn.abort()
            raise

    def begin_rollover(self) -> Transaction:
        return self.table.begin(action="commit")

    @staticmethod
    def file_keys(txn: Transaction, first_id: int) -> tuple[str, str]:
        """Keys (relative to the table) of the events file and its index for `first_id`."""
        name = file_name(first_id)
        return txn.data_key(EVENTS_PARTITION, name), txn.data_key(INDEX_PARTITION, name)

    def finish_rollover(
        self, txn: Transaction, files: Sequence[MergedFile], end_id: int, journals: int
    ) -> None:
        """Commit already written merged files as one instant (the rollover's commit point)."""
        try:
            for f in files:
                # One file group per first id: two rollovers of the same journals conflict.
                txn.add(
                    f.events_sums.apply(DataFile(
                        f.events_key, f.events_size, f.rows, EVENTS_PARTITION,
                        f"events-{f.first_id}", f.stats,
                    ))
                )  # fmt: skip
                txn.add(
                    f.index_sums.apply(DataFile(
                        f.index_key, f.index_size, f.rows, INDEX_PARTITION,
                        f"index-{f.first_id}", {},
                    ))
                )  # fmt: skip
            txn.commit(
                extra_metadata={
                    "operation": "provenance.rollover",
                    "provenance.first_event_id": str(min(f.first_id for f in files)),
                    "provenance.end_event_id": str(end_id),
                    "provenance.journals": str(journals),
                    HIGH_WATER: str(end_id),
                }
            )
            self.invalidate()
        except CommitConflict as exc:
            first = min(f.first_id for f in files)
            raise ProvenanceConflict(
                f"another rollover of events from id {first} completed first: {exc}"
            ) from exc

    def expire(self, files: Sequence[EventFile], high_water: int, reason: str) -> None:
        """Replace (logically delete) the files in one instant, then clean them."""
        paths = []
        for f in files:
            paths.append(f.events_key.removeprefix(self._prefix))
            if f.index_key:
                paths.append(f.index_key.removeprefix(self._prefix))
        txn = self.table.begin(action="replacecommit")
        try:
            txn.replace(paths)
            txn.commit(
                extra_metadata={
                    "operation": "provenance.expire",
                    "provenance.expired_files": str(len(files)),
                    "provenance.reason": reason,
                    HIGH_WATER: str(high_water),
                }
            )
        except CommitConflict as exc:
            raise ProvenanceConflict(f"expiry lost to a concurrent change: {exc}") from exc
        except BaseException:
            txn.abort()
            raise
        self.invalidate()
        crash.point("provenance.expire.replaced")
        # Retain one commit: expired events must not stay readable by time travel either.
        self.table.maintenance.clean(retained=1)
