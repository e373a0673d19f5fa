"""How the timeline encodes Parquet: columns of unique values are not dictionary-encoded past
a small dictionary (Arrow's 1 MiB dictionary is hashed, then abandoned, and the file is
larger), while columns of few distinct values keep their dictionary."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from timeline import to_parquet_bytes

pytestmark = pytest.mark.unit


def _table(n: int) -> pa.Table:
    return pa.table(
        {
            "key": pa.array([f"key-{i:09d}" for i in range(n)]),
            "category": pa.array([f"c{i % 7}" for i in range(n)]),
        }
    )


def test_unique_strings_are_smaller_than_with_a_one_mib_dictionary() -> None:
    data = _table(200_000)
    body = to_parquet_bytes(data)
    arrow_default = io.BytesIO()
    pq.write_table(data, arrow_default, compression="zstd")
    assert len(body) < len(arrow_default.getvalue())
    assert pq.ParquetFile(pa.BufferReader(body)).read().equals(data)


def test_a_column_of_few_values_keeps_its_dictionary() -> None:
    md = pq.ParquetFile(pa.BufferReader(to_parquet_bytes(_table(50_000)))).metadata
    category = md.row_group(0).column(1)
    assert category.has_dictionary_page
    assert "RLE_DICTIONARY" in category.encodings
