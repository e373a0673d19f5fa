"""The `indexing` action: build (or merge) the record-level index of a keyed table.

1. **plan** (`indexing.requested`): where to start — the latest current index (its base
   shards and the deltas after it are merged) or, without one, the snapshot at the planned
   log position (every file's key column is read);
2. **build** the key -> file group mapping from that start;
3. **catch up** to the newest completion: deltas of the writes after the start, in
   completion order; the file groups of writes that left no delta are read again (their
   newest slices' keys replace whatever the mapping said of them); groups no longer live go;
4. write the shards under the instant's data prefix (named by the log position covered, so
   two runs of one plan never overwrite each other's objects) and **complete** with their
   checksums and key ranges.

Everything before completion is invisible to readers. A run killed at any step is resumed
by the next `timeline index` from the plan in the requested object (same instant); writes
that complete after the covered position are found by every lookup as deltas or untracked
groups, so the index never has to stop writers.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from storage import Conflict, IntegrityError, NotFound

from ... import crash
from ...commit import materialize
from ...errors import CommitConflict, PlanError
from ...file_groups.log_files import logs_of
from ...instant import INDEXING, Instant, State
from ...layout import data_key, heartbeat_key
from ...metadata import DataFile
from ...parquet_io import read_files
from ...recovery import read_plan
from ...snapshot import TableState
from ...txn import Transaction
from ..keys import RECORD_KEY_COL, integer_key_column
from ..properties import KeyedProperties
from ..read import read_slice
from .record_index import (
    INDEX_SCHEMA,
    RECORD_INDEX,
    RECORD_INDEX_DELTA,
    ShardRef,
    apply_delta,
    index_view,
    put_shard,
    read_shard,
    touched_groups,
)

if TYPE_CHECKING:
    from ..context import KeyedTable

log = logging.getLogger(__name__)
OPERATION = "indexing"


def _file_keys(table: KeyedTable, f: DataFile) -> pa.Table:
    data = read_files(table.store, [f], [RECORD_KEY_COL]) or pa.table({RECORD_KEY_COL: []})
    keys = data.column(RECORD_KEY_COL).cast(pa.string())
    n = len(keys)
    return pa.table(
        {
            "key": keys,
            "partition": pa.array([f.partition] * n, pa.string()),
            "file_group": pa.array([f.group] * n, pa.string()),
        },
        schema=INDEX_SCHEMA,
    )


def _from_files(table: KeyedTable, files: list[DataFile]) -> pa.Table:
    parts = [_file_keys(table, f) for f in sorted(files, key=lambda f: f.path)]
    return pa.concat_tables(parts) if parts else INDEX_SCHEMA.empty_table()


def _from_groups(
    table: KeyedTable,
    st: TableState,
    props: KeyedProperties,
    seq: int,
    groups: Iterable[str] | None,
) -> pa.Table:
    """The mapping of these file groups (None: all) as of log position `seq`, from their
    latest slices: merge-on-read slices merged with their logs (a key a log inserted is in
    the group, one it deleted is not), copy-on-write base files as they are."""
    if not st.is_merge_on_read():
        live = st.file_slices(seq)
        wanted = live if groups is None else [g for g in groups if g in live]
        return _from_files(table, [live[g][-1] for g in wanted])
    slices = st.latest_slices(seq)
    schema = st.schema(seq)
    key_col = integer_key_column(props, schema)
    parts = []
    for g in sorted(slices if groups is None else [g for g in groups if g in slices]):
        sl = slices[g]
        rows = read_slice(table.store, sl, schema, [RECORD_KEY_COL], parallelism=1, key_col=key_col)
        keys = (rows.column(RECORD_KEY_COL) if rows is not None else pa.array([])).cast(pa.string())
        n = len(keys)
        parts.append(
            pa.table(
                {
                    "key": keys,
                    "partition": pa.array([sl.partition] * n, pa.string()),
                    "file_group": pa.array([g] * n, pa.string()),
                },
                schema=INDEX_SCHEMA,
            )
        )
    return pa.concat_tables(parts) if parts else INDEX_SCHEMA.empty_table()


def _start(
    table: KeyedTable, st: TableState, props: KeyedProperties, plan: dict[str, Any]
) -> tuple[pa.Table, int]:
    """The mapping the plan starts from and the log position it is current at."""
    view = index_view(st)
    if plan.get("source") and view is not None and view.instant == plan["source"]:
        try:
            parts = [read_shard(table.store, ref)[0] for ref in view.shards]
        except (IntegrityError, NotFound) as exc:  # derived data: rebuilt from the files
            log.warning("record index shard damaged (%s): rebuilding from the table's files", exc)
        else:
            mapping = pa.concat_tables(parts) if parts else INDEX_SCHEMA.empty_table()
            return mapping, view.covered_seq
    # No index to merge (or it went stale since the plan, or a shard is damaged): every file
    # of the snapshot at the planned position; the catch-up brings it to the newest completion.
    seq = int(plan["start_seq"])
    return _from_groups(table, st, props, seq, None), seq


def catch_up(
    table: KeyedTable,
    st: TableState,
    props: KeyedProperties,
    mapping: pa.Table,
    start: int,
    end: int,
) -> pa.Table:
    """`mapping` (current at log position `start`) brought to `end`."""
    untracked: set[str] = set()
    for w in st.ordered_writes(end):
        if w.seq <= start:
            continue
        d = w.metadata.get(RECORD_INDEX_DELTA)
        if d is not None:
            if int(d.get("rows", 0)):
                try:
                    delta, _ = read_shard(table.store, ShardRef.from_json(d))
                except (IntegrityError, NotFound) as exc:
                    # A damaged delta: its write's file groups are read again from their files.
                    log.warning("record index delta damaged (%s): reading its groups", exc)
                    untracked |= touched_groups(w, st)
                    continue
                mapping = apply_delta(mapping, delta, props)
            continue
        if w.added or w.replaced or w.replaced_partitions:
            untracked |= touched_groups(w, st)
        # A merge-on-read delta commit without a delta: its logs' groups are read again.
        untracked |= {lf.file_group for lf in logs_of(w.metadata)}
    live = st.file_slices(end)
    keep = pa.array([g for g in live if g not in untracked], pa.string())
    mapping = mapping.filter(pc.is_in(mapping.column("file_group"), value_set=keep))
    if untracked:
        mapping = pa.concat_tables([mapping, _from_groups(table, st, props, end, untracked)])
    return mapping


def _shards(
    table: KeyedTable, instant_time: str, mapping: pa.Table, covered: int
) -> list[dict[str, Any]]:
    s = table.settings
    mapping = mapping.sort_by([("key", "ascending"), ("partition", "ascending")])
    per = max(1, s.record_index_shard_keys)
    n = max(1, -(-mapping.num_rows // per))
    size = -(-mapping.num_rows // n) if mapping.num_rows else 0
    refs = []
    for k in range(n):
        rows = mapping.slice(k * size, size) if size else mapping
        path = data_key(instant_time, "", f"_record_index/{covered:012d}/shard-{k:05d}.parquet")
        refs.append(put_shard(table.store, path, rows, s.record_index_row_group_keys).to_json())
    return refs


class _IndexingTransaction(Transaction):
    """An indexing run's transaction. Two runs of one plan may race (a rerun while the
    first still runs): the loser must not delete the winner's shards, so an abort removes
    only the shards this run wrote, and nothing once the instant completed."""

    written: tuple[str, ...] = ()

    def abort(self) -> None:
        if self._done:
            return
        self._done = True
        self._heartbeat.stop()
        self.table.refresh()
        if self.table.timeline(refresh=False).completed().get(self.instant_time, INDEXING):
            return  # another run of this plan completed it: its shards are the index
        store = self.table.store
        store.delete_many(list(self.written))
        store.delete(heartbeat_key(self.instant_time))
        tl = self.table.tl
        mine = [i for i in tl.states.of_time(self.instant_time) if i.is_pending]
        tl.states.delete(sorted(mine, key=lambda i: -i.state.rank))


def _pending(table: KeyedTable) -> Instant | None:
    found = [i for i in table.timeline().pending() if i.action == INDEXING]
    return min(found, key=lambda i: i.time) if found else None


def _resume(
    table: KeyedTable, inst: Instant
) -> tuple[_IndexingTransaction, dict[str, Any]] | Instant:
    """The transaction of an interrupted run (its plan), or its completion if it landed."""
    table.refresh()
    for e in table.instants.log_entries:
        if e.time == inst.time and e.action == INDEXING:
            materialize(table.tl, e)
            return table.tl.completed_instant(e)
    plan = read_plan(table, inst)
    if inst.state is State.REQUESTED:
        with contextlib.suppress(Conflict):
            table.tl.states.create(Instant(inst.time, INDEXING, State.INFLIGHT), b"{}")
    base = int(str(plan.get("base", 0)))
    return _IndexingTransaction(table, inst.time, INDEXING, base, OPERATION), plan


def _run(table: KeyedTable, props: KeyedProperties, from_files: bool = False) -> Instant:
    pending = _pending(table)
    if pending is not None:
        got = _resume(table, pending)
        if isinstance(got, Instant):
            return got
        txn, plan = got
    else:
        st = table.state()
        view = index_view(st)
        start_seq = max((e.seq for e in st.entries), default=0)
        plan = {
            "operation": OPERATION,
            "source": view.instant if view is not None and not from_files else None,
            "start_seq": start_seq,
        }
        begun = table.begin(INDEXING, operation=OPERATION, plan=plan)
        begun.detach()  # carried on by an indexing transaction (its abort spares other runs)
        txn = _IndexingTransaction(table, begun.instant_time, INDEXING, begun.base, OPERATION)
    try:
        st = table.state()
        mapping, start = _start(table, st, props, plan)
        crash.point("indexing.built")
        st = table.state()  # what completed while the build ran is caught up below
        end = max((e.seq for e in st.entries), default=0)
        mapping = catch_up(table, st, props, mapping, start, end)
        crash.point("indexing.caught_up")
        shards = _shards(table, txn.instant_time, mapping, end)
        txn.written = tuple(str(r["path"]) for r in shards)
        crash.point("indexing.shards_written")
        txn.base = max(txn.base, end)  # validated against what completes after `end`
        metadata = {
            "operation": OPERATION,
            RECORD_INDEX: {
                "covered_seq": end,
                "start_seq": start,
                "source": plan.get("source"),
                "keys": mapping.num_rows,
                "key_scope": props.key_scope,
                "shards": shards,
            },
        }
        return txn.complete(metadata)
    except CommitConflict as exc:
        if exc.winner == txn.instant_time:  # another run of this very plan finished it
            done = table.timeline().completed().get(txn.instant_time, INDEXING)
            if done is not None:
                return done
        raise
    except BaseException:
        txn.detach()  # stays pending: the next run resumes its plan
        raise


def build_index(table: KeyedTable, attempts: int = 3, *, from_files: bool = False) -> Instant:
    """Run the `indexing` action (resuming an interrupted one); returns its completion.
    `from_files`: build from the table's files, not by merging the current index (a repair
    of an index that disagrees with them)."""
    props = table.properties
    if props is None:
        raise PlanError(f"{table.uri} is not a keyed table: only keyed tables have a record index")
    for attempt in range(attempts):
        try:
            return _run(table, props, from_files)
        except CommitConflict:
            # A rollback or restore changed history while it ran: its instant was removed
            # (Transaction.complete aborts); plan again on the new state.
            if attempt == attempts - 1:
                raise
        except NotFound:
            # A file of the planned snapshot was cleaned meanwhile: give this plan up.
            pending = _pending(table)
            if pending is not None:
                _IndexingTransaction(table, pending.time, INDEXING, 0, OPERATION).abort()
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


def merge_if_due(table: KeyedTable, deltas: int | None = None) -> Instant | None:
    """After a keyed commit: merge the deltas into base shards once there are
    `record_index_max_deltas` of them (an `indexing` run that starts from the index).
    `deltas`: their number, when the committer knows it (else the table is read)."""
    if deltas is None:
        view = index_view(table.state())
        if view is None:
            return None
        deltas = len(view.deltas)
    if deltas < table.settings.record_index_max_deltas:
        return None
    try:
        return build_index(table)
    except Exception as exc:  # the commit landed: a failed merge only delays it
        log.warning("record index merge of %s failed: %s", table.uri, exc)
        return None


__all__ = ["build_index", "catch_up", "merge_if_due"]
