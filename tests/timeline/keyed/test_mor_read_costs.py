"""What a merge-on-read snapshot costs beside a read-optimized read: a file group without
logs is read with its base file's GET alone (no log lookup, head or index read), so the
snapshot makes the read-optimized read's GETs plus one per log object; the blocks of a read
that share the table's columns are proven so once, not block by block."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any

import pyarrow as pa
import pytest

import timeline.keyed.read.slices as slices_mod
from storage import LocalObjectStore
from tests.timeline.keyed.test_mor_tables import OFF, PROPS, _rows, _values
from timeline import Table
from timeline.file_groups.log_files import LOG_FILES
from timeline.keyed.log import OP_COL


def _counting(store: LocalObjectStore, monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """GETs of the store by key, counted from here on."""
    gets: Counter[str] = Counter()
    get = store.get

    def counted(key: str, *a: Any, **kw: Any) -> bytes:
        gets[key] += 1
        return get(key, *a, **kw)

    monkeypatch.setattr(store, "get", counted)
    return gets


@pytest.mark.unit
def test_a_group_without_logs_costs_its_base_get_alone(
    local_store: LocalObjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = replace(OFF, small_file_limit=0)  # every insert: new file groups
    t = Table.create(local_store, PROPS, settings)
    for lo in range(0, 40, 10):
        t.upsert(_rows(list(range(lo, lo + 10)), "x"))
    done = t.upsert(_rows([1, 3, 5], "y"))  # odd ids: partition "a", one group
    logs = t.entry(done.time).metadata[LOG_FILES]
    logged = {d["file_group"] for d in logs}
    log_objects = {d["path"] for d in logs}
    snap = t.snapshot()
    bases = {f.group: f.path for f in snap.files}
    assert len(logged) == 1 and len(bases) >= 8
    reader = Table.open(local_store, settings)
    reader.state()  # the timeline read once, before counting
    gets = _counting(local_store, monkeypatch)
    got = reader.read()
    assert _values(got) == {i: "x" for i in range(40)} | {1: "y", 3: "y", 5: "y"}
    data = Counter({k: n for k, n in gets.items() if k in set(bases.values()) | log_objects})
    assert data == Counter({**dict.fromkeys(bases.values(), 1), **dict.fromkeys(log_objects, 1)})
    gets.clear()
    reader.read(read_optimized=True)
    ro = Counter({k: n for k, n in gets.items() if k in set(bases.values()) | log_objects})
    assert ro == Counter(dict.fromkeys(bases.values(), 1))  # the same base GETs, no log


@pytest.mark.unit
def test_blocks_in_the_tables_columns_are_proven_so_once_per_read(
    local_store: LocalObjectStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = replace(OFF, small_file_limit=0)
    t = Table.create(local_store, PROPS, settings)
    for lo in range(0, 40, 10):
        t.upsert(_rows(list(range(lo, lo + 10)), "x"))
    for v in ("y", "z"):  # two delta commits, a block per group each
        t.upsert(_rows([1, 2, 11, 12, 21, 22, 31, 32], v))
    blocks = sum(len(sl.logs) for sl in t.snapshot().merge_on_read_slices() or [])
    assert blocks >= 8
    proofs = 0
    as_written = slices_mod._as_written

    def counted(got: pa.Schema, schema: pa.Schema) -> bool:
        nonlocal proofs
        proofs += 1
        return as_written(got, schema)

    monkeypatch.setattr(slices_mod, "_as_written", counted)
    got = Table.open(local_store, settings).read()
    assert _values(got) == {i: "x" for i in range(40)} | dict.fromkeys(
        [1, 2, 11, 12, 21, 22, 31, 32], "z"
    )
    assert 1 <= proofs < blocks


@pytest.mark.unit
def test_a_block_in_other_columns_is_reshaped_after_one_proven_as_written() -> None:
    schema = pa.schema([("id", pa.int64()), ("v", pa.string())])
    usual = pa.table({"id": [1], "v": ["a"], OP_COL: ["U"]})
    older = pa.table({"id": [2], OP_COL: ["U"]})  # written before `v` was added
    wider = pa.table({"id": pa.array([3], pa.int32()), "v": ["c"], OP_COL: ["U"]})
    written = slices_mod.WrittenSchema()
    assert slices_mod._shaped(usual, schema, None, written) is usual
    assert written.holds(usual.schema)
    for block in (older, wider):
        shaped = slices_mod._shaped(block, schema, None, written)
        assert shaped.schema.names == ["id", "v", OP_COL]
        assert shaped.schema.field("id").type == pa.int64()
    assert slices_mod._shaped(older, schema, None, written).column("v").to_pylist() == [None]
