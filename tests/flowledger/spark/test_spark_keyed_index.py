"""The `keyedIndex` writer option (and `spark.flowledger.keyedIndex`) choose the index a
keyed Spark write plans its lookups with, as `TableSettings.keyed_index` does for the
Python path; another name is refused in one line before anything is written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import flowledger.spark as fs
import flowledger.spark.keyed_shards as shards
from flowledger.spark.conf import CONF_PREFIX, KEYED_INDEX_OPTION
from flowledger.spark.errors import SparkWriteError
from storage import open_store
from timeline import KeyedIndex, Table, plan_engine_write

pytestmark = pytest.mark.spark

OPTIONS = {"recordKey": "id", "orderingField": "ts"}


def test_the_keyed_index_option_reaches_the_plan(
    registered: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    planned: list[KeyedIndex] = []

    def spy(table: Table, *args: Any) -> Any:
        planned.append(table.settings.keyed_index)
        return plan_engine_write(table, *args)

    monkeypatch.setattr(shards, "plan_engine_write", spy)  # as the driver calls it
    uri = str(tmp_path / "t")
    df = registered.createDataFrame([(1, 1, 0), (2, 1, 0)], "id long, ts long, v long")
    fs.save(df, uri, options={**OPTIONS, "operation": "upsert", "keyedIndex": "Range_Bloom"})
    fs.write(df, uri, options={**OPTIONS, "operation": "upsert"})
    registered.conf.set(CONF_PREFIX + KEYED_INDEX_OPTION, "record_level")
    try:
        fs.save(df, uri, options={**OPTIONS, "operation": "upsert"})
        fs.save(df, uri, options={**OPTIONS, "operation": "upsert", "keyedIndex": "auto"})
    finally:
        registered.conf.unset(CONF_PREFIX + KEYED_INDEX_OPTION)
    assert planned == [
        KeyedIndex.RANGE_BLOOM, KeyedIndex.AUTO, KeyedIndex.RECORD_LEVEL, KeyedIndex.AUTO,
    ]  # fmt: skip
    store = open_store(uri)
    try:
        before = Table.open(store).timeline().completed().write_timeline().by_completion()
        with pytest.raises(SparkWriteError) as caught:
            fs.save(df, uri, options={**OPTIONS, "operation": "upsert", "keyedIndex": "hash"})
        assert str(caught.value) == (
            "keyedIndex must be one of auto, range_bloom, record_level, not 'hash'"
        )
        after = Table.open(store).timeline().completed().write_timeline().by_completion()
        assert after == before and len(planned) == 4
    finally:
        store.close()


def test_a_keyed_spark_write_encodes_with_the_codec_option(registered: Any, tmp_path: Path) -> None:
    """`hoodie.parquet.compression.codec` (writer option or `spark.flowledger.` conf) is the
    table setting of the same name: the executors' new file slices use it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    uri = str(tmp_path / "t")
    df = registered.createDataFrame([(1, 1, 0), (2, 1, 0)], "id long, ts long, v long")
    codec = {"hoodie.parquet.compression.codec": "snappy"}
    fs.save(df, uri, options={**OPTIONS, "operation": "upsert", **codec})
    store = open_store(uri)
    try:
        table = Table.open(store)
        (f,) = table.snapshot().files
        md = pq.ParquetFile(pa.BufferReader(store.get(f.path))).metadata
        rg = md.row_group(0)
        assert {rg.column(c).compression for c in range(rg.num_columns)} == {"SNAPPY"}
        assert sorted(table.read(columns=["id"]).column("id").to_pylist()) == [1, 2]
    finally:
        store.close()
