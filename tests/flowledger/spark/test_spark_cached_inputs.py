"""A cached DataFrame's inputs: Spark's `inputFiles()` answers nothing once the plan reads
from the cache, but the cache was filled from files, and `flowledger.spark.save` records
them (the keyed path and the data source's alike), as for the DataFrame uncached."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import flowledger.spark as fs
from flowledger.spark.save import plan_inputs

pytestmark = pytest.mark.spark


def test_save_records_the_files_behind_a_cached_dataframe(registered: Any, tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(2):
        pq.write_table(pa.table({"id": [2 * i, 2 * i + 1], "v": [i, i]}), folder / f"{i}.parquet")
    plain = registered.read.parquet(str(folder))
    files = sorted(plain.inputFiles())
    assert len(files) == 2
    cached = registered.read.parquet(str(folder)).cache()
    try:
        cached.count()
        assert cached.inputFiles() == []  # what Spark itself answers for a cached plan
        assert sorted(plan_inputs(cached)) == files
        assert sorted(plan_inputs(cached.filter("id > 0").select("id"))) == files
        keyed = fs.save(
            cached, str(tmp_path / "keyed"), options={"operation": "upsert", "recordKey": "id"}
        )
        assert sorted(keyed.job.input_files) == files
        appended = fs.save(cached, str(tmp_path / "plain"))
        assert sorted(appended.job.input_files) == files
    finally:
        cached.unpersist()
    in_memory = registered.createDataFrame([(1, 1)], "id long, v long").cache()
    try:
        assert plan_inputs(in_memory) == ()  # rows made in memory: no file behind them
    finally:
        in_memory.unpersist()
