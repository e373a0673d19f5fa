"""A keyed insert fed as a stream of record batches (a `pyarrow.RecordBatchReader`, or any
iterable of record batches or tables), written without holding the stream whole, as
delta-rs's `write_deltalake` takes a reader.

One copy-on-write commit, like an insert of a table: each batch in turn is prepared (its
duplicate keys combined by the merge mode, as an insert of a table combines them), checked
against the table (`on_duplicate`) and against the batches before it, and split by
partition into that partition's open file (`ObjectStore.open_writer`: a multipart upload on
S3). A file rolls to the next one when it holds its share of records, about
`parquet_max_file_size`; its key range, bloom filter and statistics are built from the keys
that passed. Partitions are encoded on `write_parallelism` threads (pyarrow releases the
GIL while it encodes); the next batch is read once they are done, so one batch of the
source is in hand at a time. The batch in hand and the rows held not yet encoded together
stay within `write_buffer_limit_bytes` while a batch goes in, not only between batches: a
partition gathers its rows into full row groups, so without a bound a stream spread over
many partitions would hold nearly a row group per partition, and a batch as big as the
limit leaves no room to hold any (its partitions' shares are encoded as they come, as an
insert of a table encodes them), while small batches are gathered into full row groups.
The open uploads' parts (on S3: one upload per partition, each filling a part of
`multipart_size`) keep in memory only what the batch and the rows held leave of the limit,
the rest waiting on disk (`ObjectStore.open_writer(memory=)`): a part costs a copy to a
temp file where a row held back costs a shorter row group, so the parts yield first. The
keys a stream keeps (its files' for their filters, those written for the repeat check) are
kept as runs where they come in order (keyed/write/written_keys.py). A failure anywhere aborts the
open uploads and rolls the instant back: nothing is committed and no object is left.

What differs from an insert of a table, because a stream is seen once and not whole:
- The small-file rule (keyed/write/sizing.py) picks a partition's next small file when the
  partition needs a file, on the records of the batch in hand (the rest is not known yet);
  the file then takes the stream's records up to its room, and once the rule picks none the
  partition's later files are new file groups. The small file goes in first, as the file
  opens: its row groups copied as bytes, as an insert of a table copies them
  (keyed/write/base_copy.py; decoded when its schema differs), so a filled file holds its
  old rows then the new ones, as a table insert's does. What the file keeps of it is its
  footer and its keys (for the filter, noted as the new records' are). The same rows in
  one table fill the same files unless a batch is too small to make a rewrite worth it.
- A key repeated in two batches cannot be combined (the first is already written): it is
  treated as a key the table already holds, so the write fails (`on_duplicate="fail"`,
  nothing committed) or the later record is dropped (`"drop"`).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import DuplicateKeys
from ...file_groups.sidecars import WRITE_STATS
from ...instant import COMMIT, Instant
from ...metadata import DataFile
from ...parquet_io import release_unused_memory
from ...schema import conform, merge_schemas
from ..index import RECORD_INDEX_DELTA, merge_if_due, write_delta
from ..keys import integer_key_column
from ..policies import KeyScope
from ..properties import KeyedProperties
from .base_copy import SliceFooters
from .decide import decide_upserts
from .planner import FAIL, Batch, Planner, prepare_batch
from .planning import plan_on
from .sizing import avg_record_size, fill_small_files
from .slice_writer import SliceEncoder, SliceOut
from .stream_files import OpenFile, Target
from .written_keys import WrittenKeys

if TYPE_CHECKING:
    from ..context import KeyedTable

#: What a streamed insert takes: a reader, or an iterable of record batches or tables.
BatchSource: TypeAlias = "pa.RecordBatchReader | Iterable[pa.RecordBatch | pa.Table]"


def tables_of(source: BatchSource) -> Iterator[pa.Table]:
    """The stream's batches as tables, one at a time (empty ones skipped). A batch handed
    on is let go before the next is read: a loop variable would hold it while the source
    reads the next, two batches of the source's at once where one was asked for."""
    it = iter(source)
    while (b := next(it, None)) is not None:
        t = pa.Table.from_batches([b]) if isinstance(b, pa.RecordBatch) else b
        del b
        if t.num_rows:
            yield t
        del t


def chained(head: list[pa.Table], rest: Iterator[pa.Table]) -> Iterator[pa.Table]:
    """The tables of `head` (emptied as they are handed on), then those of `rest`: unlike
    `itertools.chain` over a tuple, a table already handed on is not held until the next
    one after `head` is read."""
    while head:
        yield head.pop(0)
    yield from rest


@dataclass
class _Partition:
    """One partition's part of the stream: the small files it filled, its open file and
    the files it closed."""

    name: str
    used: set[str] = field(default_factory=set)  # file groups of small files it filled
    fills_done: bool = False  # no small file is worth filling any more
    open: OpenFile | None = None
    closed: list[tuple[DataFile, dict[str, Any], pa.ChunkedArray]] = field(default_factory=list)


class _Writing:
    """The state of one streamed insert."""

    def __init__(self, table: KeyedTable, plan: Planner, out: SliceOut, on_duplicate: str):
        s = table.settings
        self.table, self.plan, self.out, self.store = table, plan, out, table.store
        self.on_duplicate = on_duplicate
        self.settings_rows = s.parquet_row_group_rows
        self.codec = s.parquet_compression_codec.arrow
        self.buffer_limit = s.write_buffer_limit_bytes
        # The integer key column the batches' key ranges are compared on, from the stream's
        # schema (a table written for the first time has none to plan on yet).
        self.key_col = integer_key_column(plan.props, out.schema)
        self.fpp = plan.bloom_fpp
        self.footers = SliceFooters()  # the small files' copy checks, one empty file encoded
        self.record_size = avg_record_size(plan.files, s.copy_on_write_record_size_estimate)
        self.per_file = max(1, s.parquet_max_file_size // self.record_size)
        self.parts: dict[str, _Partition] = {}
        self.seen: dict[str, WrittenKeys] = {}
        self.pool = ThreadPoolExecutor(max(1, s.write_parallelism), "flowledger-stream-write")
        self.inflight: list[Future[None]] = []  # the writes of the batch in hand
        self.most_held = 0  # the most rows held not yet encoded after a write, in bytes
        self.batch_bytes = 0  # the Arrow bytes of the batch in hand (with its meta columns)
        self.batches = 0

    def fill(self, p: _Partition, count: int) -> Target | None:
        """The next small file the partition fills with `count` records in hand (the rule
        as for a table insert of them; the file then takes records up to its room), or None
        once the rule picks none: the partition's later files are new file groups."""
        if p.fills_done:
            return None
        s = self.table.settings
        files = [f for f in self.plan.files if f.partition == p.name and f.group not in p.used]
        fills = fill_small_files(
            files, count, record_size=self.record_size, small_file_limit=s.small_file_limit,
            rewrite_ratio=s.small_file_rewrite_ratio,
        )  # fmt: skip
        if not fills:
            p.fills_done = True
            return None
        f = next(f for f in files if f.group == fills[0].group)
        p.used.add(f.group)
        room = (s.small_file_limit - f.size) // avg_record_size([f], self.record_size)
        return Target(f.group, f, max(fills[0].records, int(room)))

    def write(self, p: _Partition, batch_rows: pa.Table, positions: np.ndarray) -> None:
        """Route a partition's new rows (`positions` of the batch) into its open files,
        rolling as they fill (taken here, on the pool's thread: Arrow's take releases the
        GIL, so the partitions' takes overlap)."""
        rows = conform(batch_rows.take(pa.array(positions, pa.int64())), self.out.schema)
        while rows.num_rows:
            if p.open is None:
                t = self.fill(p, rows.num_rows)
                t = t or Target(f"{uuid.uuid4()}-0", None, self.per_file)
                p.open = OpenFile(self, p.name, t)
            room = p.open.target.capacity - p.open.inserts
            p.open.add(rows.slice(0, room))
            rows = rows.slice(room)
            self.within_limit(p.open.enc)
            if p.open.inserts >= p.open.target.capacity:
                opened, p.open = p.open, None
                p.closed.append(opened.close())

    def finish(self, p: _Partition) -> None:
        if p.open is not None:
            opened, p.open = p.open, None
            p.closed.append(opened.close())

    def start(self, fn: Any, items: list[Any]) -> None:
        """`fn` over `items` on the pool, after what was started before is done."""
        self.wait()
        self.inflight = [self.pool.submit(fn, *x) for x in items]

    def wait(self) -> None:
        """Wait for what was started; the first error raised once all of it is done."""
        futures, self.inflight = self.inflight, []
        errors = [e for e in (f.exception() for f in futures) if e is not None]
        if errors:
            raise errors[0]

    def run(self, fn: Any, items: list[Any]) -> None:
        """`fn` over `items` on the pool, waiting for them."""
        self.start(fn, items)
        self.wait()

    @property
    def room(self) -> int:
        """What the open files may hold not yet encoded while the batch in hand is written:
        the limit less that batch's bytes (the batch and the rows held are the stream's
        working set)."""
        return max(0, self.buffer_limit - self.batch_bytes)

    def upload_room(self) -> int:
        """What the batch in hand and the rows held leave of `write_buffer_limit_bytes` for
        the open uploads' parts in memory (the store's own budget bounds them as well)."""
        return max(0, self.room - self.held_bytes())

    def held_bytes(self) -> int:
        """The Arrow bytes of the rows the open files hold not yet encoded (read while the
        pool writes: each file's count is its own thread's, the sum a moment's). Each
        partition's open file is read once: its thread may close it meanwhile."""
        opened = [p.open for p in list(self.parts.values())]
        return sum(o.enc.held_bytes for o in opened if o is not None)

    def within_limit(self, enc: SliceEncoder) -> None:
        """After a partition's rows went into its file (`enc`, on that partition's thread):
        if the rows held across the open files are past the room the batch in hand leaves
        within `write_buffer_limit_bytes`, this file encodes its own now, as a shorter row
        group. Before it added them the sum was within the room, so once it has encoded them
        it is again: the rows held stay within it however big a batch is."""
        total = self.held_bytes()
        if total > self.room:
            total -= enc.held_bytes
            enc.flush()
        self.most_held = max(self.most_held, total)

    def bound_held(self, batch_bytes: int, incoming: int) -> None:
        """Make room for a batch (`batch_bytes` Arrow bytes in hand, `incoming` of them its
        new records) within `write_buffer_limit_bytes` before its rows are written: the
        limit less the batch is the room the open files may hold; the files holding most encode
        theirs now (on the pool) as shorter row groups, so the files' own rule above seldom
        has to encode a file holding a few rows, and a stream whose partitions fill row
        groups slowly holds a bounded amount, not up to a row group per partition."""
        opened = [p.open for p in self.parts.values() if p.open is not None and p.open.enc.held]
        opened.sort(key=lambda o: o.enc.held_bytes, reverse=True)
        total = sum(o.enc.held_bytes for o in opened)
        self.batch_bytes = batch_bytes
        flush = []
        for o in opened:
            if total + incoming <= self.room:
                break
            flush.append((o.enc,))
            total -= o.enc.held_bytes
        self.run(SliceEncoder.flush, flush)

    def abort(self) -> None:
        # No write of the stream runs on while its uploads are aborted (the error that
        # aborts the stream is the one raised).
        with contextlib.suppress(BaseException):
            self.wait()
        for p in self.parts.values():
            if p.open is not None:
                p.open.abort()
                p.open = None


def _repeated(w: _Writing, batch: Batch, inserts: dict[str, np.ndarray]) -> pa.Array:
    """The keys of `inserts` (new records by partition) that an earlier batch of the stream
    wrote, each scope (a partition; the table for a global key) checked once; the others are
    recorded as written, and the repeated ones dropped from `inserts`."""
    if w.plan.props.key_scope == KeyScope.GLOBAL:
        n = sum(len(p) for p in inserts.values())
        # Positions are distinct: as many as the rows, they are all of them (no sort).
        if n == len(batch.keys):
            scopes = {"": np.arange(n)}
        else:
            scopes = {"": np.sort(np.concatenate(list(inserts.values())))} if n else {}
    else:
        scopes = inserts
    key_col = w.key_col
    repeated: list[pa.Array] = []
    for scope, pos in scopes.items():
        kind = w.out.schema.field(key_col).type if key_col else pa.string()
        seen = w.seen.setdefault(scope, WrittenKeys(kind))
        if len(pos) == len(batch.keys):  # every record of the batch (positions distinct)
            keys = batch.keys
            order = pc.cast(batch.rows.column(key_col), kind) if key_col else keys
        else:
            idx = pa.array(pos, pa.int64())
            keys = batch.keys.take(idx)
            order = pc.cast(batch.rows.column(key_col).take(idx), kind) if key_col else keys
        again = seen.repeated(order)
        if not again.any():
            seen.add(order)
            continue
        seen.add(order.filter(pa.array(~again)))
        repeated.append(keys.filter(pa.array(again)))
        gone = pos[again]
        for name, p in inserts.items():
            if scope in ("", name):
                inserts[name] = p[~np.isin(p, gone)]
    return pa.concat_arrays(repeated) if repeated else pa.array([], pa.string())


def _plan_batch(w: _Writing, data: pa.Table) -> list[tuple[_Partition, pa.Table, np.ndarray]]:
    """The batch's new records by partition, checked against the table and the batches
    before it (done while the pool still writes the batch before)."""
    props, t = w.plan.props, w.out.t
    batch = prepare_batch(data, props, t, upsert=True)
    extra = set(batch.rows.column_names) - set(w.out.schema.names)
    if extra:
        raise ValueError(
            f"{w.table.uri}: a stream's batches share the first batch's columns; "
            f"{sorted(extra)} are new"
        )
    inserts = decide_upserts(w.plan, batch, "insert", w.on_duplicate).inserts
    repeated = _repeated(w, batch, inserts)
    if len(repeated) and w.on_duplicate == FAIL:
        dupes = sorted(repeated.to_pylist())
        raise DuplicateKeys(
            f"insert into {w.table.uri}: {len(dupes)} key(s) repeated in two batches of one "
            f"stream, e.g. {', '.join(dupes[:5])} (combine them first, or insert with "
            "on_duplicate='drop')",
            dupes,
        )
    return [
        (w.parts.setdefault(name, _Partition(name)), batch.rows, pos)
        for name, pos in sorted(inserts.items())
        if len(pos)
    ]


def _batch_bytes(work: list[tuple[_Partition, pa.Table, np.ndarray]]) -> tuple[int, int]:
    """The Arrow bytes of a batch in hand (with its meta columns), and about those its new
    records take once split by partition (the batch's in proportion to the records
    written)."""
    if not work:
        return 0, 0
    rows = work[0][1]
    records = sum(len(pos) for _, _, pos in work)
    return rows.nbytes, int(rows.nbytes * records // max(1, rows.num_rows))


def _write_batches(w: _Writing, batches: Iterator[pa.Table]) -> None:
    """Each batch planned on this thread, then written by the pool into its partitions'
    open files; the next is read once it is written (a batch read ahead would be a second
    batch in hand, as big as the one being written, for no gain in speed measured on two
    CPUs: the pool's threads encode while the batch is split). The rows held unencoded are
    bounded by what the batch leaves of `write_buffer_limit_bytes`. What the batch's split
    and encoding freed is handed back to the operating system before the next is read:
    Arrow's allocator keeps freed pages of the pool's threads for reuse (measured on 1M-row
    batches over 20 partitions: 15-20 MiB less at the stream's peak)."""
    data = next(batches, None)
    while data is not None:
        work = _plan_batch(w, data)
        del data
        w.bound_held(*_batch_bytes(work))
        w.run(w.write, work)
        w.batches += 1
        del work
        w.batch_bytes = 0  # let go: the files' closing may use its room
        release_unused_memory()
        data = next(batches, None)


def _details(w: _Writing, props: KeyedProperties) -> dict[str, Any]:
    closed = [c for name in sorted(w.parts) for c in w.parts[name].closed]
    details: dict[str, Any] = {
        WRITE_STATS: [stats for _, stats, _ in closed],
        "keyed": {
            "files_read": w.plan.files_read,
            "properties": props.to_json(),
            "stream": {"batches": w.batches, "most_held_bytes": w.most_held},
        },
    }
    if w.plan.record_index is not None:
        changes = [
            (keys.combine_chunks(), pa.array([f.partition] * len(keys), pa.string()),
             pa.array([f.group] * len(keys), pa.string()))
            for f, _, keys in closed
        ]  # fmt: skip
        path = w.out.data_key("", "_record_index_delta.parquet")
        details[RECORD_INDEX_DELTA] = write_delta(w.store, path, changes, w.table.settings)
    return details


def insert_stream(
    table: KeyedTable,
    props: KeyedProperties,
    source: BatchSource,
    on_duplicate: str = FAIL,
    metadata: dict[str, str] | None = None,
) -> Instant:
    """Insert the stream's records into copy-on-write table `table`, one commit (see the
    module's text)."""
    txn = table.begin(COMMIT, operation="insert")
    w: _Writing | None = None
    try:
        st = table.state()
        plan_on(txn, st)
        plan = Planner(table, props, st, None)
        batches = tables_of(source)
        first = next(batches, None)
        schema = plan.schema
        if first is not None:
            # The meta columns' schema, from an empty table of the batch's schema: a
            # zero-row slice of the batch would keep its buffers for the whole stream.
            empty = first.schema.empty_table()
            probe = prepare_batch(empty, props, txn.instant_time, upsert=True)
            schema = merge_schemas(plan.schema, probe.rows.schema, table.uri)
        if schema is None:
            raise ValueError(f"{table.uri}: a keyed table states its meta columns at creation")
        txn.schema = schema
        w = _Writing(table, plan, SliceOut(txn.instant_time, txn.data_key, schema), on_duplicate)
        if first is not None:
            stream = chained([first], batches)
            del first  # not held past its own batch
            _write_batches(w, stream)
        w.run(w.finish, [(p,) for p in w.parts.values()])
        details = _details(w, props)
        for name in sorted(w.parts):
            for f, _, _ in w.parts[name].closed:
                txn.add(f)
        done = txn.commit(dict(metadata or {}), details)
    except BaseException:
        if w is not None:
            w.abort()
        txn.abort()
        raise
    finally:
        if w is not None:
            w.pool.shutdown()
    index = plan.record_index
    if index is not None and RECORD_INDEX_DELTA in details:
        merge_if_due(table, len(index.deltas) + (1 if details[RECORD_INDEX_DELTA]["rows"] else 0))
    return done
