"""Keyed writes (upsert, insert, delete) run by Spark: the tagging and the file-group
rewrite happen on the executors; the driver plans from commit metadata and commits.

The driver begins the instant and plans it (`timeline.plan_keyed_write`: the snapshot's
file list and the index's key ranges and bloom filters, small). Then, as Spark jobs:

1. each row gets its record key, partition and identity (`record_columns`, in tasks);
2. duplicate records of the batch are combined by the merge mode (a window over the
   identity: the highest ordering value, then the latest row, wins, as `keyed_write`);
3. the index names each record's candidate files (in tasks, from the plan Spark ships with
   them); the (record, file) pairs are grouped by file and each candidate file's keys are
   read once (`locate_in_file`): where each stored record is and whether the incoming
   version wins;
4. records are joined with those hits: in-place updates and deletes mark rows of their file
   group; new records, and records whose partition moved (global keys), are placed in small
   files and new file groups (`place_inserts`, from per-partition counts the driver reads);
5. one row per change, grouped by target file group: each group's new slice is written by
   one task with a `TaskWriter` (`write_slice`).

Nothing of the data reaches the driver: it reads per-partition counts and one small row per
written file (its description and write stats). The native writer runs step 5 as a grouped
Arrow function; the data source gets the same rows, sorted by file group, in its tasks.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from storage import StoreSettings, open_store
from timeline import (
    META_COLUMNS,
    DataFile,
    DuplicateKeys,
    KeyedWritePlan,
    PropertiesError,
    TaskWriter,
    WriteTarget,
    locate_in_file,
    place_inserts,
    record_columns,
    write_slice,
)

from .keyed_options import KeyedOptions

P = "__flp_"
SEQ, KEY, PART, ID = P + "seq", P + "key", P + "part", P + "id"
FILE, GROUP, FPART, ROW, WINS = P + "file", P + "group", P + "fpart", P + "row", P + "wins"
TARGET, KIND, RANK = P + "target", P + "kind", P + "rank"
INSERT, UPDATE, DROP = "i", "u", "d"
#: Property values (docs/tables.md, "Properties").
GLOBAL_KEYS, EVENT_TIME_MODE = "global", "event_time"
#: The rows one rewrite task returns to the driver: a written file and its write stats.
RESULT_SCHEMA = "file string, stat string, beat boolean"


@dataclass(frozen=True)
class Shipped:
    """What the executors' functions carry (pickled with them)."""

    plan: KeyedWritePlan
    store_uri: str
    store: StoreSettings
    order_col: str | None
    has_ordering: bool
    upsert: bool
    user_columns: tuple[str, ...] = ()
    target: WriteTarget | None = None


# -- executor side ---------------------------------------------------------------------------
def _with_keys(s: Shipped, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for b in batches:
        keys, parts, ids = record_columns(
            pa.Table.from_batches([b]), s.plan.props, upsert=s.upsert, schema=s.plan.table_schema
        )
        cols = [*b.columns, *(pa.array(v, pa.string()) for v in (keys, parts, ids))]
        yield pa.RecordBatch.from_arrays(cols, names=[*b.schema.names, KEY, PART, ID])


def _candidates(s: Shipped, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """(record, candidate file) pairs from the index, one batch of records at a time."""
    index = s.plan.index(open_store(s.store_uri, s.store))
    for b in batches:
        t = pa.Table.from_batches([b])
        keys, parts = t.column(KEY).to_pylist(), t.column(PART).to_pylist()
        scopes: dict[str, list[int]] = {}
        for i, p in enumerate(parts):
            scopes.setdefault("" if s.plan.props.key_scope == GLOBAL_KEYS else p, []).append(i)
        take: list[int] = []
        paths: list[str] = []
        for part, positions in scopes.items():
            files = s.plan.scope(part)
            if not files:
                continue
            found = index.candidates(files, [keys[i] for i in positions])
            for path, hits in found.items():
                take += [positions[h] for h in hits]
                paths += [path] * len(hits)
        picked = t.select([ID, KEY, *([s.order_col] if s.order_col else [])])
        picked = picked.take(pa.array(take, pa.int64()))
        yield from picked.append_column(FILE, pa.array(paths, pa.string())).to_batches()


def _lookup(s: Shipped, t: pa.Table) -> pa.Table:
    """One candidate file's keys read once: which records it holds, and which win."""
    path = t.column(FILE)[0].as_py()
    f = next(f for f in s.plan.files if f.path == path)
    keys = t.column(KEY).to_pylist()
    ordering = t.column(s.order_col).to_pylist() if s.order_col else None
    store = open_store(s.store_uri, s.store)
    hits = locate_in_file(store, s.plan, f, keys, ordering, has_ordering=s.has_ordering)
    ids = t.column(ID).to_pylist()
    n = len(hits)
    return pa.table(
        {
            ID: pa.array([ids[h.position] for h in hits], pa.string()),
            GROUP: pa.array([f.group] * n, pa.string()),
            FPART: pa.array([f.partition] * n, pa.string()),
            ROW: pa.array([h.row for h in hits], pa.int64()),
            WINS: pa.array([h.wins for h in hits], pa.bool_()),
        }
    )


def rewrite_group(
    s: Shipped, writer: TaskWriter, t: pa.Table
) -> tuple[DataFile, dict[str, Any]] | None:
    """Write one file group's new slice from its change rows (all of one `__flp_target`)."""
    group = t.column(TARGET)[0].as_py()
    kinds = t.column(KIND).to_pylist()
    rows = t.column(ROW).to_pylist()
    drop = [int(r) for k, r in zip(kinds, rows, strict=True) if k in (UPDATE, DROP)]
    new = t.filter(pc.is_in(t.column(KIND), value_set=pa.array([INSERT, UPDATE])))
    new = new.sort_by(SEQ)
    counts = (kinds.count(INSERT), kinds.count(UPDATE), kinds.count(DROP))
    partition = str(t.column(PART)[0].as_py() or "")
    body = new.select(list(s.user_columns)) if new.num_rows else None
    keys = [str(k) for k in new.column(KEY).to_pylist()] if new.num_rows else []
    return write_slice(writer, s.plan, group, partition, drop, body, keys, counts)


def task_writer(s: Shipped) -> TaskWriter:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    task = f"{ctx.partitionId():05d}-{ctx.taskAttemptId()}" if ctx else "0"
    assert s.target is not None
    return TaskWriter(open_store(s.store_uri, s.store), s.target, task, guard=True)


def _rewrite(s: Shipped, t: pa.Table) -> pa.Table:
    writer = task_writer(s)
    got = rewrite_group(s, writer, t)
    files, stats = ([json.dumps(got[0].to_json())], [json.dumps(got[1])]) if got else ([], [])
    return pa.table(
        {
            "file": pa.array(files, pa.string()),
            "stat": pa.array(stats, pa.string()),
            "beat": pa.array([writer.beat] * len(files), pa.bool_()),
        }
    )


def _grouped(fn: Any, s: Shipped) -> Any:
    """`fn(s, table)` as a function of one Arrow table, type-hinted: PySpark infers a grouped
    Arrow function's kind from its hints (a `functools.partial` has none)."""

    def run(t: pa.Table) -> pa.Table:
        out: pa.Table = fn(s, t)
        return out

    return run


# -- driver side -----------------------------------------------------------------------------
@dataclass
class KeyedJob:
    """A planned keyed write: its change rows (lazy) and what the driver cached for them."""

    shipped: Shipped
    work: Any  # DataFrame: one row per change, `__flp_target` names its file group
    pairs: Any  # DataFrame: (record, candidate file) pairs
    cached: list[Any] = field(default_factory=list)

    def files_read(self) -> int:
        """How many stored files the key lookup read (a small Spark job)."""
        return int(self.pairs.select(FILE).distinct().count())

    def release(self) -> None:
        for df in self.cached:
            df.unpersist()


def plan_job(
    df: Any,
    plan: KeyedWritePlan,
    kopts: KeyedOptions,
    store_uri: str,
    store: StoreSettings,
    target: WriteTarget,
) -> KeyedJob:
    """The Spark plan of a keyed write (see the module docstring); raises `DuplicateKeys`
    for an insert that meets stored keys (`onDuplicate=fail`) before anything is written."""
    from pyspark import StorageLevel
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    spark = df.sparkSession
    props = plan.props
    user = tuple(c for c in df.columns if c not in META_COLUMNS)
    order_col = props.ordering_field if props.ordering_field in user else None
    if kopts.upsert and props.merge_mode == EVENT_TIME_MODE and order_col is None:
        raise PropertiesError(
            f"merge mode event_time needs the ordering field {props.ordering_field!r} "
            "in the written data"
        )
    s = Shipped(
        plan, store_uri, store, order_col, kopts.upsert or order_col is not None,
        kopts.upsert, user, target,
    )  # fmt: skip
    src = df.select(*user).withColumn(SEQ, F.monotonically_increasing_id())
    text = [StructField(c, StringType(), False) for c in (KEY, PART, ID)]
    keyed = src.mapInArrow(partial(_with_keys, s), StructType([*src.schema.fields, *text]))
    # Duplicates of a record: Hudi's precombine, the rule of timeline.keyed.merge.combine.
    order = (
        [F.col(order_col).desc_nulls_last()]
        if props.merge_mode == EVENT_TIME_MODE and order_col
        else []
    )
    w = Window.partitionBy(ID).orderBy(*order, F.col(SEQ).desc())
    combined = (
        keyed.withColumn(P + "n", F.row_number().over(w)).where(F.col(P + "n") == 1).drop(P + "n")
    ).persist(StorageLevel.MEMORY_AND_DISK)
    pair_fields = [combined.schema[ID], combined.schema[KEY]]
    if order_col:
        pair_fields.append(combined.schema[order_col])
    pair_schema = StructType([*pair_fields, StructField(FILE, StringType(), False)])
    pairs = combined.select(ID, KEY, PART, *([order_col] if order_col else [])).mapInArrow(
        partial(_candidates, s), pair_schema
    )
    hit_schema = f"{ID} string, {GROUP} string, {FPART} string, {ROW} long, {WINS} boolean"
    hits = pairs.groupBy(FILE).applyInArrow(_grouped(_lookup, s), hit_schema).dropDuplicates([ID])
    joined = combined.join(hits, ID, "left").persist(StorageLevel.MEMORY_AND_DISK)
    job = KeyedJob(s, None, pairs, [combined, joined])
    found = F.col(GROUP).isNotNull()
    change_cols = [F.col(SEQ), F.col(ROW)]
    if not kopts.upsert:
        job.work = joined.where(found & F.col(WINS)).select(
            F.col(GROUP).alias(TARGET), F.lit(DROP).alias(KIND), *change_cols,
            F.col(FPART).alias(PART),
        )  # fmt: skip
        return job
    if kopts.operation == "insert":
        if kopts.on_duplicate == "fail":
            dupes = joined.where(found)
            if dupes.limit(1).count():
                n = dupes.count()
                sample = sorted(r[0] for r in dupes.select(KEY).limit(5).collect())
                raise DuplicateKeys(
                    f"insert into the table: {n} key(s) already in the table, e.g. "
                    f"{', '.join(sample)} (upsert them, or insert with onDuplicate=drop)",
                    sample,
                )
        live = joined.where(~found)
    else:
        live = joined.where(~found | F.col(WINS))
    data = [F.col(c) for c in (*user, KEY, PART)]
    in_place = found & (F.col(FPART) == F.col(PART))
    updates = live.where(in_place).select(
        *data, F.col(GROUP).alias(TARGET), F.lit(UPDATE).alias(KIND), *change_cols
    )
    # A global key whose partition changed: deleted from its old group, inserted in the new.
    moved = live.where(found & ~in_place).select(
        F.col(GROUP).alias(TARGET), F.lit(DROP).alias(KIND), *change_cols,
        F.col(FPART).alias(PART),
    )  # fmt: skip
    pending = live.where(~found | ~in_place)
    # One small job for both facts placing new records needs, as the Python path has them:
    # new records per partition, and the file groups this write rewrites anyway (updated in
    # place or moved out of), which take new records before other small files do.
    tally = (
        live.select(
            F.when(~found | ~in_place, F.col(PART)).alias(P + "into"),
            F.when(found, F.col(GROUP)).alias(P + "hit"),
        )
        .groupBy(P + "into", P + "hit")
        .count()
        .collect()
    )
    counts: dict[str, int] = {}
    for into, _, n in tally:
        if into is not None:
            counts[str(into)] = counts.get(str(into), 0) + int(n)
    rewritten = {str(hit) for _, hit, _ in tally if hit is not None}
    work = updates.unionByName(moved, allowMissingColumns=True)
    placements = place_inserts(plan, counts, rewritten)
    if placements:
        ranges = spark.createDataFrame(
            [(p.partition, p.start, p.end, p.group) for p in placements],
            StructType(
                [
                    StructField(P + "rpart", StringType()),
                    StructField(P + "start", LongType()),
                    StructField(P + "end", LongType()),
                    StructField(TARGET, StringType()),
                ]
            ),
        )
        ranked = pending.withColumn(
            RANK, F.row_number().over(Window.partitionBy(PART).orderBy(SEQ)) - 1
        )
        cond = (
            (F.col(PART) == F.col(P + "rpart"))
            & (F.col(RANK) >= F.col(P + "start"))
            & (F.col(RANK) < F.col(P + "end"))
        )
        inserts = ranked.join(F.broadcast(ranges), cond).select(
            *data, F.col(TARGET), F.lit(INSERT).alias(KIND), F.col(SEQ),
            F.lit(None).cast("long").alias(ROW),
        )  # fmt: skip
        work = work.unionByName(inserts, allowMissingColumns=True)
    job.work = work
    return job


def rewrite_natively(job: KeyedJob) -> tuple[list[DataFile], list[dict[str, Any]], bool]:
    """Run the rewrite as a grouped Arrow function; the driver gets one row per file."""
    rows = (
        job.work.groupBy(TARGET).applyInArrow(_grouped(_rewrite, job.shipped), RESULT_SCHEMA)
    ).collect()
    files = [DataFile.from_json(json.loads(r["file"])) for r in rows]
    stats = [json.loads(r["stat"]) for r in rows]
    return files, stats, any(bool(r["beat"]) for r in rows)


def sorted_by_group(job: KeyedJob) -> Any:
    """The change rows as the data source's tasks take them: each file group's rows in one
    task, contiguous."""
    return job.work.repartition(TARGET).sortWithinPartitions(TARGET, SEQ)


def iter_groups(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.Table]:
    """Tables of one `__flp_target` each from batches sorted by it (a group may span
    batches)."""
    pending: list[pa.Table] = []
    current: Any = None
    for b in batches:
        t = pa.Table.from_batches([b])
        targets = t.column(TARGET).to_pylist()
        start = 0
        for i in range(1, len(targets) + 1):
            if i < len(targets) and targets[i] == targets[start]:
                continue
            piece = t.slice(start, i - start)
            if current is not None and targets[start] != current:
                yield pa.concat_tables(pending)
                pending = []
            current = targets[start]
            pending.append(piece)
            start = i
    if pending:
        yield pa.concat_tables(pending)
