"""Reading merge-on-read slices: a base file merged with its log blocks.

The merge is the table's merge mode, applied here (keyed/read/merge.py): blocks in completion
order, each entry by the rule its log file records, a key matched within its own file group;
a snapshot merges many slices in one pass. Each base is split by its slice's log keys on the
thread that decoded it (rows no log names set apart, filtered there while hot), so the merge
sees only the named rows. Every object of a read (base files and log objects) is fetched
once, through one bounded pool the reader owns, so a slice's logs are fetched concurrently
with each other and with other slices' objects; a log object holding blocks of several
slices read together is fetched whole, once (keyed/log/objects.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pyarrow as pa

from storage import ObjectStore

from ...file_groups import FileSlice
from ...file_groups.log_files import LogFile
from ...metadata import DataFile
from ...parquet_io import read_files
from ...schema import conform
from ..keys import RECORD_KEY_COL
from ..log import OP_COL, LogCache, fetch_whole, read_log, read_log_object
from .merge import Rule, concat, merge, merge_slices
from .split import split_named

#: Objects (base files and logs) one snapshot read fetches at once (GETs in flight).
READ_PARALLELISM = 8
#: Slices a snapshot read merges in one pass (log_merge.merge_slices): enough that the
#: per-call overhead of the array operations is paid rarely, few enough that the merged
#: rows of a batch are a small part of the read.
MERGE_BATCH = 64


def _projection(
    columns: Sequence[str] | None, sl: FileSlice, key_col: str | None = None
) -> list[str] | None:
    """The columns a slice read fetches: the record key (and the integer key column keys
    are matched by) and the ordering column its logs merge by, whatever `columns` says."""
    if columns is None:
        return None
    keys = [RECORD_KEY_COL, *([key_col] if key_col else [])]
    need = [*keys, *sorted({lf.merge_by for _, lf in sl.logs if lf.merge_by})]
    return list(columns) + [c for c in need if c not in columns]


def _rules(sl: FileSlice) -> list[Rule]:
    return [Rule(lf.merge_by, lf.ordered_deletes) for _, lf in sl.logs]


def _log_rows(
    store: ObjectStore,
    lf: LogFile,
    schema: pa.Schema | None,
    wanted: list[str] | None,
    cache: LogCache | None = None,
    written: WrittenSchema | None = None,
) -> pa.Table:
    rows = cache.read(lf) if cache is not None else read_log(store, lf)
    return _shaped(rows, schema, wanted, written)


def _shaped(
    rows: pa.Table,
    schema: pa.Schema | None,
    wanted: list[str] | None,
    written: WrittenSchema | None = None,
) -> pa.Table:
    """A block's rows in the table's schema, projected to `wanted` (op column last);
    `written`: the reader's memory of the block columns already proven as written."""
    if wanted is None and schema is not None:
        if written is not None and written.holds(rows.schema):
            return rows
        if _as_written(rows.schema, schema):
            if written is not None:
                written.learn(rows.schema)
            return rows  # the usual block of a full read: nothing to reshape
    ops = rows.column(OP_COL)
    body = rows.drop_columns([OP_COL])
    if schema is not None and not _conformed(body.schema, schema, wanted):
        body = conform(body, schema, wanted)
    if wanted is not None:
        body = body.select([c for c in wanted if c in body.column_names])
    return body.append_column(OP_COL, ops)


class WrittenSchema:
    """The block columns a reader has found to be the table's schema and the op column (the
    usual block, written in the table's current schema). The blocks of a read mostly share
    them: comparing a block's columns with these is one Arrow schema comparison, where
    proving them afresh (`_as_written`) builds a schema and a list of names per block,
    about 6 us, paid for each of the thousands of blocks of a snapshot after many delta
    commits."""

    def __init__(self) -> None:
        self._known: pa.Schema | None = None

    def holds(self, got: pa.Schema) -> bool:
        known = self._known  # (read once: another thread may set it meanwhile)
        return known is not None and bool(got.equals(known))

    def learn(self, got: pa.Schema) -> None:
        self._known = got


def _as_written(got: pa.Schema, schema: pa.Schema) -> bool:
    """Whether a block's columns are the table's schema and the op column, in order and
    of the same types (a schema comparison in Arrow, not a loop over the fields here)."""
    if len(got) != len(schema) + 1 or got.names[-1] != OP_COL:
        return False
    return bool(got.remove(len(schema)).equals(schema))


def _conformed(got: pa.Schema, schema: pa.Schema, wanted: list[str] | None) -> bool:
    """Whether a block's columns are already what `conform` would make of them (the usual
    block, written in the table's current schema): conforming it again costs more than the
    check, paid for every block of a read."""
    names = [c for c in wanted if c in schema.names] if wanted is not None else schema.names
    if got.names != names:
        return False
    return all(got.field(c).type == schema.field(c).type for c in names)


def _base_rows(
    store: ObjectStore, f: DataFile, schema: pa.Schema | None, wanted: list[str] | None
) -> pa.Table:
    base = read_files(store, [f], wanted, schema)
    return base if base is not None else pa.table({})


def _finish(merged: pa.Table, columns: Sequence[str] | None) -> pa.Table:
    if columns is None:
        return merged
    extra = [c for c in merged.column_names if c not in columns]
    return merged.drop_columns(extra) if extra else merged


#: A slice as fetched: its base's rows no log names, the rows some log names, its log rows.
Fetched = tuple[FileSlice, pa.Table, pa.Table, list[pa.Table]]


def _split(base: pa.Table, logs: list[pa.Table], key_col: str | None) -> tuple[pa.Table, pa.Table]:
    """`base` as (rows no entry of `logs` names, rows some entry names), each in base order
    (keyed/read/split.py). Run on the thread that decoded the base, right after: the copy
    that drops the named rows then reads memory still in cache and writes memory that
    thread's allocator just freed (a base decoded on one thread and filtered later on another
    faulted in fresh pages for every copy: most of a snapshot's time over a read-optimized
    read)."""
    return split_named(base, logs, key_col)


def _joined(tables: list[pa.Table]) -> pa.Table:
    """`tables` as one (chunks, no copy), leaving out the empty ones that would only add
    chunks (or, with no columns, break the concatenation)."""
    kept = [t for t in tables if t.num_rows] or [t for t in tables if t.num_columns][:1]
    kept = kept or tables[:1]
    return kept[0] if len(kept) == 1 else concat(kept)


class SliceReader:
    """Reads merged slices with a bounded pool of fetches (base files and logs alike)."""

    def __init__(
        self,
        store: ObjectStore,
        schema: pa.Schema | None,
        columns: Sequence[str] | None = None,
        parallelism: int = READ_PARALLELISM,
        cache: LogCache | None = None,
        key_col: str | None = None,
    ) -> None:
        self.store = store
        self.schema = schema
        self.columns = columns
        self.parallelism = max(1, parallelism)
        self.cache = cache
        #: The table's single integer record key column: keys are matched as its numbers
        #: (keyed/read/merge.py); None: as the record key text.
        self.key_col = key_col
        self.written = WrittenSchema()

    def read(self, slices: Sequence[FileSlice]) -> list[pa.Table]:
        """Each slice's merged rows, in the order given: its base rows no log names (in
        base order), then what the merge of its logs with the named base rows keeps."""
        out = []
        for sl, rest, named, logs in self._fetched(slices):
            merged = merge(named, logs, _rules(sl), key_col=self.key_col)
            out.append(_finish(_joined([rest, merged]), self.columns))
        return out

    def read_merged(self, slices: Sequence[FileSlice]) -> pa.Table | None:
        """Every slice's merged rows (None: no slices), `MERGE_BATCH` slices merged in one
        pass (merge.merge_slices) as their objects come in: per batch, the base rows no log
        names (set apart where each base was decoded), then the merge of the logs with the
        named base rows, slice by slice."""
        out: list[pa.Table] = []
        todo: list[tuple[pa.Table, list[pa.Table], list[Rule]]] = []
        for sl, rest, named, logs in self._fetched(slices):
            out.append(_finish(rest, self.columns))
            todo.append((named, logs, _rules(sl)))
            if len(todo) >= MERGE_BATCH:
                out.append(_finish(merge_slices(todo, key_col=self.key_col), self.columns))
                todo = []
        if todo:
            out.append(_finish(merge_slices(todo, key_col=self.key_col), self.columns))
        return _joined(out) if out else None

    def _fetched(self, slices: Sequence[FileSlice]) -> Iterator[Fetched]:
        """Each slice with its base split by its logs (`_split`) and its log rows, in the
        order given. Every fetch is queued at once, logs before the base that waits for
        them, and a slice comes out as soon as its own objects are in. A log object holding
        blocks of several of these slices is fetched once, whole; a block read alone is a
        ranged GET."""
        objects = sum(1 + len(sl.logs) for sl in slices)
        if objects <= 1 or self.parallelism == 1:
            for sl in slices:
                w = _projection(self.columns, sl, self.key_col)
                c = self.cache
                logs = [
                    _log_rows(self.store, lf, self.schema, w, c, self.written) for _, lf in sl.logs
                ]
                base = _base_rows(self.store, sl.base, self.schema, w)
                yield sl, *_split(base, logs, self.key_col), logs
            return
        whole = {} if self.cache else fetch_whole([lf for sl in slices for _, lf in sl.logs])
        with ThreadPoolExecutor(min(self.parallelism, objects), "flowledger-slice-read") as pool:
            shared = {
                p: pool.submit(read_log_object, self.store, p, lfs) for p, lfs in whole.items()
            }
            queued = [self._queue(pool, sl, shared) for sl in slices]
            for sl, done in zip(slices, queued, strict=True):
                yield sl, *done.result()

    def _part(
        self, part: Future[pa.Table] | Future[dict[str, pa.Table]], lf: LogFile, w: list[str] | None
    ) -> pa.Table:
        got = part.result()
        if isinstance(got, dict):  # a block of an object fetched whole
            return _shaped(got[lf.ref], self.schema, w, self.written)
        return got

    def _queue(
        self,
        pool: ThreadPoolExecutor,
        sl: FileSlice,
        shared: dict[str, Future[dict[str, pa.Table]]],
    ) -> Future[tuple[pa.Table, pa.Table, list[pa.Table]]]:
        """The slice's fetches queued: its logs, then its base, which waits for them. A
        task waits only on tasks queued before it (the pool takes them in order), so every
        task it waits on is already running or done: no deadlock, whatever the pool size."""
        s, w = self.schema, _projection(self.columns, sl, self.key_col)
        parts: list[Any] = [
            shared[lf.path]
            if lf.path in shared
            else pool.submit(_log_rows, self.store, lf, s, w, self.cache, self.written)
            for _, lf in sl.logs
        ]

        def base() -> tuple[pa.Table, pa.Table, list[pa.Table]]:
            rows = _base_rows(self.store, sl.base, s, w)
            logs = [self._part(part, lf, w) for part, (_, lf) in zip(parts, sl.logs, strict=True)]
            return *_split(rows, logs, self.key_col), logs

        return pool.submit(base)


def read_slice(
    store: ObjectStore,
    sl: FileSlice,
    schema: pa.Schema | None,
    columns: Sequence[str] | None = None,
    *,
    parallelism: int = READ_PARALLELISM,
    cache: LogCache | None = None,
    key_col: str | None = None,
) -> pa.Table:
    """One slice's merged rows in the table's schema (`columns`: a projection; the record
    key is read whatever it says, and dropped again when not asked for). Its base and logs
    are fetched concurrently (`parallelism` 1: one after the other, for a caller that
    already reads several slices at once); `cache`: its log blocks from there; `key_col`:
    the table's single integer record key column (`keys.integer_key_column`), keys
    matched as numbers."""
    return SliceReader(store, schema, columns, parallelism, cache, key_col).read([sl])[0]


def read_slices(
    store: ObjectStore,
    slices: Sequence[FileSlice],
    schema: pa.Schema | None,
    columns: Sequence[str] | None = None,
    *,
    key_col: str | None = None,
) -> pa.Table | None:
    """Every slice's merged rows, concatenated in the order given (None: no slices);
    `key_col` as for `read_slice`."""
    return SliceReader(store, schema, columns, key_col=key_col).read_merged(slices)
