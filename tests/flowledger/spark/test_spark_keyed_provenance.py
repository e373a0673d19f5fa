"""Provenance of keyed commits made by Spark: the same events as the Python path's (a JOIN
per new file slice naming the slice it superseded and the job, RECEIVE per input file), so
a slice's lineage reaches every file the jobs before it read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import flowledger.spark as fs
from flowledger.pipeline.trace import trace
from flowledger.slice_provenance import slice_uuid
from flowledger.spark.commit_info import REPO_CONF_KEY
from provenance import ProvenanceRepository
from storage import open_store
from timeline import Table

pytestmark = pytest.mark.spark


def _frame(spark: Any, tmp_path: Path, name: str, ids: list[int], v: str) -> Any:
    path = tmp_path / "in" / name
    path.parent.mkdir(exist_ok=True)
    pq.write_table(pa.table({"id": ids, "v": [v] * len(ids)}), path)
    return spark.read.parquet(str(path))


@pytest.mark.parametrize(
    ("writer", "table_type"),
    [("datasource", "copy_on_write"), ("native", "copy_on_write"), ("native", "merge_on_read")],
)
def test_a_spark_keyed_commit_joins_the_slice_it_replaced_and_its_inputs(
    registered: Any, tmp_path: Path, writer: str, table_type: str
) -> None:
    """Upserts from Parquet inputs (a second one on copy-on-write), then an insert of a new
    key from another: each new slice has a JOIN whose parents are the job and the slice it
    superseded, and its lineage reaches the inputs of every write that made it (the Python
    path's rule)."""
    spark = registered
    uri = str(tmp_path / "t")
    put = fs.save if writer == "datasource" else fs.write
    opts = {"recordKey": "id", "tableType": table_type, "operation": "upsert"}
    put(_frame(spark, tmp_path, "a.parquet", [1, 2, 3], "a"), uri, options=opts)
    table = Table.open(open_store(uri))
    first = table.files()[0]
    if table_type == "copy_on_write":
        put(_frame(spark, tmp_path, "b.parquet", [2], "b"), uri, options=opts)
    new = _frame(spark, tmp_path, "c.parquet", [9], "c")
    put(new, uri, options={**opts, "operation": "insert"})
    table = Table.open(open_store(uri))
    latest = next(f for f in table.files() if f.group == first.group)
    with ProvenanceRepository.open(open_store(spark.conf.get(REPO_CONF_KEY))) as prov:
        for f in table.files():
            ff = slice_uuid(table.store.url(f.path))
            sources = {(e.transit_uri or "").rsplit("/", 1)[-1] for e in trace(prov, ff).sources()}
            if f.group != first.group:  # the new key's file group
                assert sources == {"c.parquet"}, f.path
                continue
            want = {"a.parquet"}  # a delta commit's log is no new slice
            if table_type == "copy_on_write":
                want.add("b.parquet")
            if len(table.files()) == 1:  # the new key went into the small file
                want.add("c.parquet")
            assert sources == want, f.path
        _, rows = prov.sql(
            "SELECT parent_uuids FROM provenance WHERE event_type = 'JOIN' "
            f"AND flowfile_uuid = '{slice_uuid(table.store.url(latest.path))}'"
        )
    assert len(rows) == 1 and len(rows[0][0]) == (2 if table_type == "copy_on_write" else 1)
    if table_type == "copy_on_write":  # the job, and the slice it superseded
        assert slice_uuid(table.store.url(first.path)) in rows[0][0]
