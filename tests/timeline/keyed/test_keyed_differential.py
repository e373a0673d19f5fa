"""Differential test of keyed tables: random insert/upsert/delete sequences applied to a
copy-on-write table, a merge-on-read table and a plain reference model
(tests/support/keyed_model.py). After every step the snapshot equals the model and time
travel to every earlier instant equals the model then; at the end, incremental and CDC reads
between any two instants equal the model's difference. Merge-on-read tables also plan
compactions at random points and execute them later, with delta commits completing in
between (a completed compaction is a step that changes no record).
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from storage import ObjectStore, StoreSettings, open_store
from tests.support.keyed_model import KeyedModel, cdc_rows, table_rows
from tests.support.servers import S3Endpoint
from timeline import Table, TableSettings
from timeline.errors import DuplicateKeys
from timeline.keyed import KeyedProperties, build_index

SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("p", pa.string()), ("v", pa.string())])

rows_st = st.lists(
    st.fixed_dictionaries(
        {
            "id": st.integers(0, 7),
            "ts": st.integers(0, 3),  # few values: ordering ties are common
            "p": st.sampled_from(["a", "b"]),  # a global key may move partition
            "v": st.sampled_from(["x", "y", "z"]),
        }
    ),
    min_size=1,
    max_size=8,  # duplicate keys inside a batch are common
)
op_st = st.one_of(
    st.tuples(st.just("upsert"), rows_st),
    st.tuples(st.just("insert_drop"), rows_st),
    st.tuples(st.just("insert_fail"), rows_st),
    st.tuples(st.just("delete"), rows_st),  # keys may be missing: a no-op
    st.tuples(st.just("delete_ordered"), rows_st),
    st.tuples(st.just("delete_sql"), st.sampled_from(["x", "y"])),
    st.tuples(st.just("delete_expr"), st.sampled_from(["x", "z"])),
    st.tuples(st.just("cluster"), st.none()),  # replacecommit: new file groups, same records
    st.tuples(st.just("cluster"), st.none()),  # (listed twice: it often has nothing to do)
    st.tuples(st.just("rollback_last"), st.none()),  # undo the newest keyed commit
    # merge-on-read: plan a compaction now (writes go on while it is pending), and execute
    # the oldest pending plan, or plan and execute one
    st.tuples(st.just("schedule"), st.none()),
    st.tuples(st.just("compact"), st.none()),
)
CASE = {
    "merge_mode": st.sampled_from(["commit_time", "event_time"]),
    "key_scope": st.sampled_from(["global", "partition"]),
    "small_file_limit": st.sampled_from([0, 0, 4000, 100 * 1024 * 1024]),
    "max_file_size": st.sampled_from([2500, 120 * 1024 * 1024]),
    "rewrite_ratio": st.sampled_from([1.0, 0.0, float("inf")]),
}
case_st = st.fixed_dictionaries({**CASE, "ops": st.lists(op_st, min_size=1, max_size=7)})
# With the record-level index: built at creation, rebuilt (merged) by `index` steps, and
# merged by commits once 3 deltas pile up; tiny shards and row groups so lookups span several.
indexed_case_st = st.fixed_dictionaries(
    {**CASE, "ops": st.lists(st.one_of(op_st, st.just(("index", None))), min_size=1, max_size=8)}
)
# Merge-on-read sequences start from stored records and compact more often (a compaction
# needs logs, which only updates and deletes of stored records write).
mor_op_st = st.one_of(op_st, st.tuples(st.just("upsert"), rows_st), st.just(("compact", None)))
mor_case_st = case_st.flatmap(
    lambda c: st.tuples(rows_st, st.lists(mor_op_st, min_size=4, max_size=12)).map(
        lambda first_ops: {**c, "ops": [("upsert", first_ops[0]), *first_ops[1]]}
    )
)


RECORD_INDEX_SETTINGS = {
    "keyed_index": "record_level",
    "record_index_shard_keys": 3,
    "record_index_row_group_keys": 2,
    "record_index_max_deltas": 3,
}


def _run(
    store: ObjectStore,
    case: dict[str, Any],
    table_type: str = "copy_on_write",
    record_index: bool = False,
) -> None:
    props = KeyedProperties.of(
        "id",
        ordering_field="ts",
        partition_by="p",
        merge_mode=case["merge_mode"],
        key_scope=case["key_scope"],
        table_type=table_type,
    )
    ts = TableSettings(
        small_file_limit=case["small_file_limit"],
        parquet_max_file_size=case["max_file_size"],
        small_file_rewrite_ratio=case.get("rewrite_ratio", 1.0),
        local_entry_cache=False,
        compaction_mode="off",  # compactions happen where the sequence says
        **(RECORD_INDEX_SETTINGS if record_index else {}),  # type: ignore[arg-type]
    )
    table = Table.create(store, props, ts)
    if record_index:
        build_index(table)
    model = KeyedModel(case["merge_mode"], case["key_scope"])
    times = [table.timeline().completed().last().time]  # the creation commit: step 0
    for kind, arg in case["ops"]:
        if kind == "insert_fail" and model.existing(arg):
            with pytest.raises(DuplicateKeys):
                table.insert(pa.Table.from_pylist(arg, SCHEMA))
            continue  # nothing committed
        if kind == "index":
            build_index(table)  # no commit: the snapshot is unchanged
            event("indexed")
            continue
        if kind == "rollback_last":
            if len(times) == 1:
                continue  # never the creation commit
            table.maintenance.rollback(times.pop())
            event("rolled back")
            model.states.pop()
            done = None
        elif kind == "schedule":
            if (
                table_type == "merge_on_read"
                and table.maintenance.schedule_compaction() is not None
            ):
                event("compaction scheduled")
            continue  # nothing completes yet
        elif kind == "compact":
            if table_type != "merge_on_read":
                continue
            # pending plans first (some no longer fit: dropped)
            ran = table.maintenance.run_compaction()
            if not ran:
                now = table.maintenance.compact()
                ran = [now.time] if now is not None else []
            if not ran:
                continue  # no file group has logs
            for earlier in ran[:-1]:  # each completed compaction is a step
                times.append(earlier)
                model.states.append(model.states[-1])
            model.states.append(model.states[-1])
            done = table.entry(ran[-1])
            event("compacted")
        elif kind == "cluster":
            done = table.maintenance.cluster()
            if done is None:
                continue  # nothing worth clustering
            model.states.append(model.states[-1])
            event("clustered")
        else:
            done = _apply(table, model, kind, arg)
        if done is not None:
            times.append(done.time)
        step = len(times) - 1
        assert table_rows(table.read()) == model.snapshot(step, times)
        for earlier in range(step):
            assert table_rows(table.read(as_of=times[earlier])) == model.snapshot(earlier, times)
    for begin in range(len(times)):
        for end in range(begin, len(times)):
            got = table.changes(times[begin], times[end])
            assert table_rows(got) == model.incremental(begin, end, times), (begin, end)
            got_cdc = table.changes(times[begin], times[end], cdc=True)
            assert cdc_rows(got_cdc) == model.cdc(begin, end, times), (begin, end)


def _apply(table: Table, model: KeyedModel, kind: str, arg: Any) -> Any:
    if kind == "upsert":
        model.upsert(arg)
        return table.upsert(pa.Table.from_pylist(arg, SCHEMA))
    if kind in ("insert_drop", "insert_fail"):
        model.upsert(arg, insert_only=True)
        policy = "drop" if kind == "insert_drop" else "fail"
        return table.insert(pa.Table.from_pylist(arg, SCHEMA), on_duplicate=policy)
    if kind == "delete":
        model.delete(arg, has_ordering=False)
        keys = pa.Table.from_pylist(arg, SCHEMA).select(["id", "p"])
        return table.delete(keys)
    if kind == "delete_ordered":
        model.delete(arg, has_ordering=True)
        return table.delete(pa.Table.from_pylist(arg, SCHEMA).select(["id", "ts", "p"]))
    if kind == "delete_sql":
        model.delete_where_v(arg)
        return table.delete(where=f"v = '{arg}'")
    assert kind == "delete_expr"
    model.delete_where_v(arg)
    return table.delete(where=pc.field("v") == arg)


def _run_local(
    root: str,
    case: dict[str, Any],
    table_type: str = "copy_on_write",
    record_index: bool = False,
) -> None:
    store = open_store("file://" + root, StoreSettings(fsync=False))
    try:
        _run(store, case, table_type, record_index)
    finally:
        store.close()


EXAMPLES = int(os.environ.get("FLOWLEDGER_KEYED_EXAMPLES", "30"))


@pytest.mark.unit
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=case_st)
def test_keyed_table_matches_model_local(case: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory(prefix="keyed-diff-") as root:
        _run_local(root, case)


@pytest.mark.minio
@settings(
    max_examples=max(3, EXAMPLES // 6),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(case=case_st)
def test_keyed_table_matches_model_minio(minio: S3Endpoint, case: dict[str, Any]) -> None:
    store = open_store(f"s3://{minio.new_bucket()}/repo", minio.settings())
    try:
        _run(store, case)
    finally:
        store.close()


@pytest.mark.unit
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=mor_case_st)
def test_merge_on_read_table_matches_model_local(case: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory(prefix="mor-diff-") as root:
        _run_local(root, case, "merge_on_read")


@pytest.mark.unit
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=indexed_case_st)
def test_keyed_table_with_record_index_matches_model_local(case: dict[str, Any]) -> None:
    """The same, with every lookup answered by the record-level index (its deltas, merges,
    and the fallback for writes that left no delta: clustering, rollbacks)."""
    with tempfile.TemporaryDirectory(prefix="keyed-diff-rli-") as root:
        _run_local(root, case, record_index=True)


@pytest.mark.minio
@settings(
    max_examples=max(3, EXAMPLES // 6),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(case=mor_case_st)
def test_merge_on_read_table_matches_model_minio(minio: S3Endpoint, case: dict[str, Any]) -> None:
    store = open_store(f"s3://{minio.new_bucket()}/repo", minio.settings())
    try:
        _run(store, case, "merge_on_read")
    finally:
        store.close()


@pytest.mark.minio
@settings(
    max_examples=max(3, EXAMPLES // 6),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(case=indexed_case_st)
def test_keyed_table_with_record_index_matches_model_minio(
    minio: S3Endpoint, case: dict[str, Any]
) -> None:
    store = open_store(f"s3://{minio.new_bucket()}/repo", minio.settings())
    try:
        _run(store, case, record_index=True)
    finally:
        store.close()
