"""A copy-on-write rewrite holds one row group of its file decoded and never the new file
whole: the base file is decoded a piece of a row group at a time, and the new slice is
encoded straight into a streaming upload (`ObjectStore.open_writer`) in pieces, its size and
checksum counted as they pass. So what an upsert or a delete holds does not grow with the file
it rewrites."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from storage import LocalObjectStore, ObjectWriter, StoreSettings, checksum_of, open_store
from timeline import Table, TableSettings, describe_bytes
from timeline.keyed import KeyedProperties
from timeline.keyed.write import slice_writer

pytestmark = pytest.mark.unit

PROPS = KeyedProperties.of("id", ordering_field="ts")
GROUP_ROWS = 1_000
ROWS = 6_500  # seven row groups


@dataclass
class Seen:
    """What the rewrite handed the store and decoded."""

    puts: set[str] = field(default_factory=set)
    pieces: dict[str, list[int]] = field(default_factory=dict)
    decoded: list[int] = field(default_factory=list)  # rows of each piece decoded, all columns


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> Iterator[Seen]:
    s = Seen()
    put, open_writer = LocalObjectStore.put, LocalObjectStore.open_writer
    read_row_group, iter_batches = pq.ParquetFile.read_row_group, pq.ParquetFile.iter_batches

    def recording_put(self: LocalObjectStore, key: str, data: bytes) -> Any:
        s.puts.add(key)
        return put(self, key, data)

    def recording_writer(self: LocalObjectStore, key: str, **kw: Any) -> ObjectWriter:
        w = open_writer(self, key, **kw)
        write, sizes = w.write, s.pieces.setdefault(key, [])

        def piece(data: bytes | bytearray | memoryview) -> int:
            sizes.append(len(data))
            return write(data)

        w.write = piece  # type: ignore[method-assign]
        return w

    def recording_read(self: pq.ParquetFile, i: int, columns: Any = None, **kw: Any) -> pa.Table:
        t = read_row_group(self, i, columns=columns, **kw)
        if columns is None:
            s.decoded.append(t.num_rows)
        return t

    def recording_batches(self: pq.ParquetFile, *args: Any, **kw: Any) -> Iterator[pa.RecordBatch]:
        for b in iter_batches(self, *args, **kw):
            if kw.get("columns") is None:
                s.decoded.append(b.num_rows)
            yield b

    # The encoder gathers up to `SINK_CHUNK` encoded bytes before passing them on: made
    # small here, so this small file's pieces show that it is streamed, never held whole.
    monkeypatch.setattr(slice_writer, "SINK_CHUNK", 4096)
    monkeypatch.setattr(LocalObjectStore, "put", recording_put)
    monkeypatch.setattr(LocalObjectStore, "open_writer", recording_writer)
    monkeypatch.setattr(pq.ParquetFile, "read_row_group", recording_read)
    monkeypatch.setattr(pq.ParquetFile, "iter_batches", recording_batches)
    yield s


def _rows(ids: range, ts: int) -> pa.Table:
    return pa.table({"id": list(ids), "ts": [ts] * len(ids), "v": [f"value-{i:08d}" for i in ids]})


def _table(tmp_path: Path) -> tuple[Table, LocalObjectStore]:
    settings = TableSettings(local_entry_cache=False, parquet_row_group_rows=GROUP_ROWS)
    store = open_store("file://" + str(tmp_path / "t"), StoreSettings(fsync=False))
    assert isinstance(store, LocalObjectStore)
    t = Table.create(store, PROPS, settings)
    t.insert(_rows(range(ROWS), 1))
    return t, store


def _check_streamed(t: Table, store: LocalObjectStore, seen: Seen) -> None:
    (f,) = t.snapshot().files
    assert f.path not in seen.puts, "the new slice is streamed, not PUT whole"
    pieces = seen.pieces[f.path]
    assert sum(pieces) == f.size and len(pieces) >= 7
    assert max(pieces) < f.size / 3, pieces
    body = store.get(f.path)
    assert f.checksum == checksum_of(body)
    assert f.column_stats == describe_bytes(f.path, body).column_stats
    assert seen.decoded and max(seen.decoded) <= GROUP_ROWS
    assert len(seen.decoded) >= 7, "every row group of the base file decoded on its own"


def test_an_upsert_streams_its_rewrite_a_row_group_at_a_time(tmp_path: Path, seen: Seen) -> None:
    t, store = _table(tmp_path)
    seen.puts.clear()
    seen.decoded.clear()
    t.upsert(_rows(range(0, ROWS + 300, 9), 2))
    _check_streamed(t, store, seen)
    got = {r["id"]: r["ts"] for r in t.read(columns=["id", "ts"]).to_pylist()}
    expected = {i: 1 for i in range(ROWS)} | {i: 2 for i in range(0, ROWS + 300, 9)}
    assert got == expected


def test_a_delete_streams_its_rewrite_a_row_group_at_a_time(tmp_path: Path, seen: Seen) -> None:
    t, store = _table(tmp_path)
    seen.puts.clear()
    seen.decoded.clear()
    t.delete(pa.table({"id": list(range(5, ROWS, 13))}))
    _check_streamed(t, store, seen)
    got = sorted(r["id"] for r in t.read(columns=["id"]).to_pylist())
    assert got == [i for i in range(ROWS) if i % 13 != 5]
