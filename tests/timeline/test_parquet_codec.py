"""The data files' compression codec (`TableSettings.parquet_compression_codec`, Hudi's
`hoodie.parquet.compression.codec`): every path that writes a data file (a plain write,
keyed inserts of a table and of a stream, upserts, deletes, compaction, clustering) writes
its new row groups with it, and a file that keeps old row groups keeps their codec."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from storage import ObjectStore, StoreSettings, open_store
from timeline import ParquetCodec, Table, TableSettings
from timeline.keyed import KeyedProperties


def _settings(codec: str, **kw: object) -> TableSettings:
    """Settings naming the codec as a user does (any case; held as its `ParquetCodec`)."""
    return TableSettings(parquet_compression_codec=codec, local_entry_cache=False, **kw)  # type: ignore[arg-type]


def _store(tmp_path: Path) -> ObjectStore:
    return open_store(f"file://{tmp_path}/t", StoreSettings(fsync=False))


def _codecs(t: Table) -> set[str]:
    """The codecs of every column chunk of the table's current data files."""
    out = set()
    for f in t.snapshot().files:
        md = pq.ParquetFile(pa.BufferReader(t.store.get(f.path))).metadata
        for g in range(md.num_row_groups):
            rg = md.row_group(g)
            out |= {rg.column(c).compression for c in range(rg.num_columns)}
    return out


def _rows(ids: range | list[int], v: str) -> pa.Table:
    ids = list(ids)
    return pa.table({"id": ids, "p": [f"p{i % 2}" for i in ids], "v": [v] * len(ids)})


@pytest.mark.unit
def test_the_codec_is_parsed_by_name_and_an_unknown_one_is_refused_in_one_line() -> None:
    assert TableSettings().parquet_compression_codec is ParquetCodec.ZSTD
    assert _settings(" Snappy ").parquet_compression_codec is ParquetCodec.SNAPPY
    assert ParquetCodec.UNCOMPRESSED.arrow == "none"
    with pytest.raises(ValueError) as err:
        _settings("lzo")
    assert str(err.value) == (
        "parquet_compression_codec must be one of zstd, snappy, gzip, lz4, uncompressed, not 'lzo'"
    )


@pytest.mark.unit
@pytest.mark.parametrize(
    ("codec", "written"),
    [("zstd", "ZSTD"), ("snappy", "SNAPPY"), ("gzip", "GZIP"), ("uncompressed", "UNCOMPRESSED")],
)
def test_a_plain_write_uses_the_codec(tmp_path: Path, codec: str, written: str) -> None:
    t = Table.create(_store(tmp_path), settings=_settings(codec))
    data = pa.table({"id": list(range(1000)), "v": ["x"] * 1000})
    t.write(data)
    assert _codecs(t) == {written}
    assert t.read().sort_by("id").equals(data)


@pytest.mark.unit
def test_every_keyed_copy_on_write_path_writes_the_codec(tmp_path: Path) -> None:
    props = KeyedProperties.of("id", partition_by="p")
    t = Table.create(_store(tmp_path), props, _settings("snappy"))
    t.insert(_rows(range(0, 100), "a"))  # a table
    batches = [_rows(range(100, 150), "b"), _rows(range(150, 200), "b")]
    t.insert(iter(batches))  # a stream
    t.upsert(_rows([1, 2, 250], "c"))
    t.delete([3, 4])
    assert _codecs(t) == {"SNAPPY"}
    got = t.read(columns=["id", "v"]).sort_by("id")
    ids = [i for i in range(200) if i not in (3, 4)] + [250]
    assert got.column("id").to_pylist() == ids
    assert got.column("v").to_pylist()[:3] == ["a", "c", "c"]


@pytest.mark.unit
def test_compaction_writes_the_codec(tmp_path: Path) -> None:
    props = KeyedProperties.of("id", partition_by="p", table_type="merge_on_read")
    t = Table.create(_store(tmp_path), props, _settings("lz4", compaction_mode="off"))
    t.insert(_rows(range(0, 100), "a"))
    t.upsert(_rows([5, 6], "b"))  # a delta commit: log blocks, compacted below
    assert t.maintenance.compact() is not None
    assert _codecs(t) == {"LZ4"}
    got = t.read(columns=["id", "v"]).sort_by("id")
    assert got.column("id").to_pylist() == list(range(100))
    assert got.column("v").to_pylist()[4:8] == ["a", "b", "b", "a"]


@pytest.mark.unit
def test_clustering_writes_the_codec(tmp_path: Path) -> None:
    props = KeyedProperties.of("id", partition_by="p")
    t = Table.create(_store(tmp_path), props, _settings("gzip", small_file_limit=0))
    t.insert(_rows(range(0, 100), "a"))
    t.insert(_rows(range(100, 200), "b"))  # new file groups beside the first ones
    assert len(t.snapshot().files) == 4
    assert t.maintenance.cluster() is not None
    assert len(t.snapshot().files) == 2
    assert _codecs(t) == {"GZIP"}
    assert t.read(columns=["id"]).sort_by("id").column("id").to_pylist() == list(range(200))


@pytest.mark.unit
def test_a_filled_small_file_keeps_its_old_row_groups_codec(tmp_path: Path) -> None:
    """A small file filled with new records keeps its row groups as bytes: a table whose
    codec changed holds files of both, and reads them as one."""
    props = KeyedProperties.of("id", partition_by="p")
    store = _store(tmp_path)
    Table.create(store, props, _settings("zstd")).insert(_rows(range(0, 100), "a"))
    t = Table(store, _settings("snappy"))
    t.insert(_rows(range(100, 200), "b"))
    assert _codecs(t) == {"ZSTD", "SNAPPY"}
    assert t.read(columns=["id"]).sort_by("id").column("id").to_pylist() == list(range(200))
