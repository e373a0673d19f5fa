"""Copy-on-write rewrites a file group a row group at a time: the new base file's row groups
are bounded by `parquet_row_group_rows`, small pieces (kept rows, new rows) are gathered into
full row groups, and the rows are those of a rewrite that decoded the whole file."""

from __future__ import annotations

import io
import zlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from storage import StoreSettings, open_store
from storage.checksum import format_checksum
from timeline import Table, TableSettings
from timeline.keyed import RECORD_KEY_COL, KeyedProperties
from timeline.keyed.index import BloomBuilder, BloomFilter
from timeline.keyed.write.base_copy import WholeBase
from timeline.keyed.write.slice_writer import SINK_CHUNK, encode_slice
from timeline.parquet_splice import FinishedFile

pytestmark = pytest.mark.unit

PROPS = KeyedProperties.of("id", ordering_field="ts")


def _rows(ids: range, ts: int) -> pa.Table:
    return pa.table({"id": list(ids), "ts": [ts] * len(ids), "v": [f"v{i}" for i in ids]})


def test_a_rewritten_file_group_has_bounded_row_groups_and_every_kept_row(tmp_path: Path) -> None:
    settings = TableSettings(local_entry_cache=False, parquet_row_group_rows=1_000)
    store = open_store("file://" + str(tmp_path / "t"), StoreSettings(fsync=False))
    t = Table.create(store, PROPS, settings)
    t.insert(_rows(range(0, 4_500), 1))
    # Updates and deletes spread over every row group, and new keys, in one rewrite.
    t.upsert(_rows(range(0, 4_500, 7), 2))
    t.delete(pa.table({"id": list(range(3, 4_500, 11))}))
    # Updates and new keys: the group rewritten anyway takes the new keys.
    t.upsert(_rows(range(4_490, 5_200), 3))
    files = t.snapshot().files
    assert len(files) == 1, "the rewritten group took the new keys: one file group"
    md = pq.ParquetFile(pa.BufferReader(store.get(files[0].path))).metadata
    sizes = [md.row_group(i).num_rows for i in range(md.num_row_groups)]
    assert max(sizes) == 1_000 and all(s == 1_000 for s in sizes[:-1]), sizes
    got = {r["id"]: r["ts"] for r in t.read(columns=["id", "ts"]).to_pylist()}
    expected = {i: (2 if i % 7 == 0 else 1) for i in range(4_490)}
    for i in range(3, 4_490, 11):
        expected.pop(i)
    expected.update({i: 3 for i in range(4_490, 5_200)})
    assert got == expected


def test_an_empty_slice_still_carries_the_schema() -> None:
    schema = pa.schema([(RECORD_KEY_COL, pa.string()), ("id", pa.int64())])
    sink = io.BytesIO()
    written = encode_slice([], schema, 10, sink)
    assert written.rows == 0 and written.key_range == (None, None) and written.bloom is None
    assert written.size == len(sink.getvalue())
    assert pq.read_table(pa.BufferReader(sink.getvalue())).schema == schema


def test_the_filter_built_a_row_group_at_a_time_is_the_filter_of_all_the_keys() -> None:
    """A slice's filter filled as its row groups are encoded (sized up front for its key
    count) holds the same bits as one built from all its keys at once; its key range is that
    of all the keys."""
    schema = pa.schema([(RECORD_KEY_COL, pa.string()), ("id", pa.int64())])
    ids = [7_000 - i * 3 for i in range(2_500)]
    keys = [f"k{i}" for i in ids]
    parts = [pa.table({RECORD_KEY_COL: keys[i : i + 300], "id": ids[i : i + 300]}, schema=schema)
             for i in range(0, len(ids), 300)]  # fmt: skip
    written = encode_slice(parts, schema, 1_000, io.BytesIO(), BloomBuilder(len(keys), 1e-6))
    assert written.footer.num_row_groups == 3
    assert written.bloom == BloomFilter.build(keys, 1e-6)
    assert written.key_range == (min(keys), max(keys))


def test_the_key_range_holds_keys_too_long_for_statistics_and_copied_row_groups_without() -> None:
    """The key range comes from the footer's statistics of the key column, which the Parquet
    writer leaves out for a value over 4096 bytes and an older file may lack: those keys are
    ranged as they pass, so the range is always that of every key."""
    schema = pa.schema([(RECORD_KEY_COL, pa.string()), ("id", pa.int64())])
    lead_keys = ["m", "a" * 10, "zz"]  # the copied file's smallest and largest keys
    buf = io.BytesIO()
    pq.write_table(pa.table({RECORD_KEY_COL: lead_keys, "id": [1, 2, 3]}, schema=schema), buf,
                   write_statistics=False)  # fmt: skip
    lead = WholeBase(FinishedFile.of(buf.getvalue()))
    assert lead.footer.row_group(0).column(0).statistics is None
    long_low, long_high = "0" * 5_000, "\u00ff" * 3_000  # no statistics: over 4096 bytes
    parts = [
        pa.table({RECORD_KEY_COL: ["b", "c"], "id": [4, 5]}, schema=schema),
        pa.table({RECORD_KEY_COL: [long_low, "d"], "id": [6, 7]}, schema=schema),
        pa.table({RECORD_KEY_COL: ["e", long_high], "id": [8, 9]}, schema=schema),
    ]
    written = encode_slice(parts, schema, 2, io.BytesIO(), lead=lead)
    assert written.footer.num_row_groups == 4
    every = [*lead_keys, "b", "c", long_low, "d", "e", long_high]
    assert written.key_range == (min(every), max(every)) == (long_low, long_high)
    # Short keys alone: the range is the statistics'.
    short = encode_slice(parts[:1], schema, 2, io.BytesIO())
    assert short.key_range == ("b", "c")


class _Recording:
    """A sink that keeps every piece written to it."""

    def __init__(self) -> None:
        self.pieces: list[bytes] = []

    def write(self, data: bytes, /) -> int:
        self.pieces.append(bytes(data))
        return len(data)


def test_the_sink_gets_few_large_pieces_whose_checksum_is_the_files() -> None:
    n = 300_000
    rng = np.random.default_rng(7)
    t = pa.table(
        {
            RECORD_KEY_COL: pa.array([f"k{i:09d}" for i in range(n)]),
            "id": pa.array(range(n), pa.int64()),
            "x": pa.array(rng.random(n)),
        }
    )
    sink = _Recording()
    written = encode_slice([t.slice(0, 70_000), t.slice(70_000)], t.schema, 50_000, sink)
    body = b"".join(sink.pieces)
    assert written.size == len(body) > 2 * SINK_CHUNK, len(body)
    assert written.checksum == format_checksum(zlib.crc32(body))
    assert pq.read_table(pa.BufferReader(body)).equals(t)
    # The Parquet writer's pages are gathered natively, not passed on one by one.
    assert len(sink.pieces) <= len(body) // SINK_CHUNK + 2, len(sink.pieces)
