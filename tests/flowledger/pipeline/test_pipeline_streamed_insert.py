"""The pipeline's copy-on-write step: planes.csv streamed into the keyed `planes` table by
`Table.insert` with a `pyarrow.RecordBatchReader` (one commit, several batches), and the same
step on a repository that already holds the planes (a run again) dropping every key."""

from __future__ import annotations

from pathlib import Path

import pytest

from flowledger.pipeline import raw_files
from flowledger.pipeline import tables as tbl
from flowledger.pipeline.streamed import insert_planes
from storage import open_store
from timeline import TableType

pytestmark = pytest.mark.unit


def _planes() -> bytes:
    return next(f for f in raw_files() if f.name == "planes").read_bytes()


def test_planes_are_streamed_into_a_copy_on_write_table_in_one_commit(tmp_path: Path) -> None:
    repo = str(tmp_path / "repo")
    tables = tbl.Tables(repo, open_store(repo))
    data = _planes()
    first, entry = insert_planes(tables, data)
    assert first.batches > 1  # a stream, not one table
    assert (first.action, first.operation) == ("commit", "insert")
    assert first.rows_in == first.rows_written == first.table_rows == data.count(b"\n") - 1
    assert first.files and all(name.endswith(".parquet") for name, _, _, _ in first.files)
    table = tables.table(tbl.PLANES)
    props = table.properties
    assert props is not None and props.table_type == TableType.COPY_ON_WRITE
    assert [e.time for e in table.state().ordered_writes() if e.added] == [entry.time]
    tails = table.read(columns=["tailnum"]).column("tailnum").to_pylist()
    assert len(set(tails)) == len(tails) == first.table_rows

    again, _ = insert_planes(tables, data)  # the pipeline run again: every key is held
    assert (again.rows_in, again.rows_written, again.table_rows) == (
        first.rows_in,
        0,
        first.table_rows,
    )
