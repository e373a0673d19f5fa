"""Incremental and CDC reads split for an engine (`plan_changes` on the driver, one unit per
task) return what `Table.changes` returns on a merge-on-read table too: the changes delta
commits keep in logs, compactions yielding none, an insert_overwrite's deletes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from storage import StoreSettings, open_store
from timeline import Table, TableSettings, plan_changes, read_changed_file, read_commit_changes
from timeline.keyed import KeyedProperties

SETTINGS = TableSettings(compaction_mode="off", small_file_limit=0, local_entry_cache=False)


def _rows(ids: list[int], v: int, ts: int = 1, p: str | None = None) -> pa.Table:
    parts = [p or ("a" if i % 2 else "b") for i in ids]
    return pa.table({"id": ids, "p": parts, "v": [v] * len(ids), "ts": [ts] * len(ids)})


def _history(tmp_path: Path, props: KeyedProperties) -> tuple[Table, list[str]]:
    """Inserts, updates and deletes in logs, a compaction, more logs, an insert_overwrite."""
    store = open_store(f"file://{tmp_path}/t", StoreSettings(fsync=False))
    t = Table.create(store, props, SETTINGS)
    times = [t.upsert(_rows(list(range(20)), 0)).time]
    times.append(t.upsert(_rows([1, 2, 3, 30], 1, ts=2)).time)
    times.append(t.delete(pa.table({"id": [4, 5], "p": ["b", "a"], "ts": [9, 9]})).time)
    compaction = t.maintenance.compact()
    assert compaction is not None
    times.append(compaction.time)
    times.append(t.upsert(_rows([2, 6, 31], 2, ts=3)).time)
    times.append(t.write(_rows([101], 5, p="a"), mode="overwrite").time)
    times.append(t.upsert(_rows([8], 3, ts=4)).time)
    return t, times


def _canon(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted(tuple(sorted((k, repr(v)) for k, v in r.items())) for r in rows)


def _engine(t: Table, props: KeyedProperties, begin: str | None, **kw: Any) -> list[Any]:
    plan = plan_changes(t, props, begin, **kw)
    if plan.cdc:
        got = [read_commit_changes(t.store, plan, props, u) for u in plan.commits]
    else:
        got = [read_changed_file(t.store, plan, f) for f in plan.files]
    for g in got:
        assert g.schema == plan.output_schema
    return [r for g in got for r in g.to_pylist()]


@pytest.mark.unit
@pytest.mark.parametrize("scope", ["global", "partition"])
def test_engine_change_reads_of_a_merge_on_read_table_equal_table_changes(
    tmp_path: Path, scope: str
) -> None:
    props = KeyedProperties.of(
        "id", ordering_field="ts", partition_by="p", merge_mode="event_time",
        key_scope=scope, table_type="merge_on_read",
    )  # fmt: skip
    t, times = _history(tmp_path, props)
    for begin in (None, times[0], times[2], times[4]):
        want = t.changes(begin, cdc=True).to_pylist()
        assert want  # every range holds changes
        assert _canon(_engine(t, props, begin, cdc=True)) == _canon(want)
        want = t.changes(begin).to_pylist()
        assert _canon(_engine(t, props, begin)) == _canon(want)
        full = t.changes(begin, full_scan=True).to_pylist()
        assert _canon(_engine(t, props, begin, full_scan=True)) == _canon(full)
    updates = [r for r in t.changes(times[0], cdc=True).to_pylist() if r["op"] == "u"]
    assert updates  # updates still in logs are seen
