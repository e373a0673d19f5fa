"""A keyed insert fed as a stream of record batches writes what the same rows inserted as one
table write (rows, files, key ranges, bloom filters), holds a key repeated across batches to
the insert's duplicate rule, and commits nothing and leaves no object when the stream fails
part-way."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import timeline.keyed.operations as operations
import timeline.keyed.write.stream as stream_module
import timeline.keyed.write.stream_files as stream_files
from storage import StoreSettings, open_store
from timeline import Table, TableSettings
from timeline.errors import DuplicateKeys
from timeline.file_groups.sidecars import WRITE_STATS
from timeline.keyed import KeyedProperties

PROPS = KeyedProperties.of("id", ordering_field="ts", partition_by="part")
SETTINGS = dict(local_entry_cache=False, parquet_row_group_rows=500)


def _rows(lo: int, hi: int, ts: int = 1) -> pa.Table:
    ids = np.arange(lo, hi, dtype=np.int64)
    return pa.table(
        {
            "id": ids,
            "part": pa.array([f"p{i % 3}" for i in ids.tolist()]),
            "ts": np.full(len(ids), ts, dtype=np.int64),
            "name": pa.array([f"name-{i}" for i in ids.tolist()]),
        }
    )


def _table(path: Path, **settings: Any) -> Table:
    store = open_store("file://" + str(path), StoreSettings(fsync=False))
    return Table.create(store, PROPS, TableSettings(**{**SETTINGS, **settings}))


def _files(t: Table, instant: str) -> list[tuple[Any, ...]]:
    """What the commit wrote, file by file, without the names that are random."""
    stats = t.entry(instant).metadata[WRITE_STATS]
    out = []
    for s in stats:
        bloom = s.get("bloom") or s.get("bloom_checksum")  # inline bits, or the sidecar's sum
        assert bloom
        out.append((s["partition"], s["rows"], s["inserts"], s["min_key"], s["max_key"],
                    s["prev_commit"] is not None, str(bloom)))  # fmt: skip
    return sorted(out)


def _rows_of(t: Table) -> list[dict[str, Any]]:
    return sorted(t.read(columns=["id", "part", "ts", "name"]).to_pylist(), key=lambda r: r["id"])


@pytest.mark.unit
def test_a_stream_of_batches_writes_what_one_table_writes(tmp_path: Path) -> None:
    # Small files to fill (the first inserts) and files that roll (max file size small).
    opts = dict(parquet_max_file_size=40_000, small_file_limit=30_000)
    whole, streamed = _table(tmp_path / "a", **opts), _table(tmp_path / "b", **opts)
    for t in (whole, streamed):
        t.insert(_rows(0, 600))
    data = _rows(600, 9_000)
    one = whole.insert(data)
    many = streamed.insert(pa.RecordBatchReader.from_batches(data.schema, data.to_batches(700)))
    got, want = _files(streamed, many.time), _files(whole, one.time)
    assert got == want
    assert any(filled for *_, filled, _ in want) and len(want) > 3  # fills and rolls both seen
    assert _rows_of(streamed) == _rows_of(whole)


@pytest.mark.unit
def test_a_key_repeated_across_batches_follows_the_duplicate_rule(tmp_path: Path) -> None:
    t = _table(tmp_path / "t")
    t.insert(_rows(0, 10))
    before = t.snapshot().instant_time
    batches = [_rows(10, 20), _rows(15, 25, ts=2)]
    with pytest.raises(DuplicateKeys, match="repeated in two batches") as err:
        t.insert(iter(batches))
    assert err.value.keys == [str(i) for i in sorted(range(15, 20), key=str)]
    assert t.snapshot().instant_time == before  # nothing committed
    t.insert(iter(batches), on_duplicate="drop")
    got = {r["id"]: r["ts"] for r in _rows_of(t)}
    assert got == {**{i: 1 for i in range(20)}, **{i: 2 for i in range(20, 25)}}
    # Within one batch, duplicates combine by the merge mode, as a table insert does.
    dup = pa.concat_tables([_rows(30, 31, ts=5), _rows(30, 31, ts=7)])
    t.insert(iter(dup.combine_chunks().to_batches()))
    assert {r["id"]: r["ts"] for r in _rows_of(t)}[30] == 7


def _failing(data: pa.Table, after: int) -> Iterator[pa.RecordBatch]:
    for i, b in enumerate(data.to_batches(50_000)):
        if i == after:
            raise RuntimeError("the source failed")
        yield b


@pytest.mark.minio
@pytest.mark.timeout(300)
def test_a_stream_that_fails_part_way_commits_nothing_and_leaves_no_object(minio: Any) -> None:
    bucket = minio.new_bucket()
    client = minio.client()
    store = open_store(f"s3://{bucket}/t", minio.settings())
    settings = TableSettings(local_entry_cache=False, parquet_row_group_rows=20_000)
    t = Table.create(store, PROPS, settings)
    t.insert(_rows(0, 10))
    before = t.snapshot().instant_time
    rng = np.random.default_rng(1)
    # Random bytes: files of MiBs, past one upload part (a multipart upload) by the time the
    # source fails (a batch is written while the next one is read, so that is two batches on).
    n = 500_000
    blob = pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(100), n, [None, pa.py_buffer(rng.bytes(n * 100))]
    )
    data = _rows(10, 10 + n).append_column("blob", blob)
    seen: list[int] = []

    def uploads() -> list[str]:
        found = client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
        return [u["Key"] for u in found]

    def source() -> Iterator[pa.RecordBatch]:
        for b in _failing(data, after=9):
            seen.append(len(uploads()))
            yield b

    with pytest.raises(RuntimeError, match="the source failed"):
        t.insert(source())
    assert max(seen) >= 1, "a multipart upload was under way when the source failed"
    assert uploads() == []
    t2 = Table.open(open_store(f"s3://{bucket}/t", minio.settings()))
    assert t2.snapshot().instant_time == before
    keys = [o["Key"] for o in client.list_objects_v2(Bucket=bucket, Prefix="t/data/").get(
        "Contents", [])]  # fmt: skip
    written = {f.path for f in t2.snapshot().files}
    assert [k for k in keys if not any(k.endswith(p) for p in written)] == []


@pytest.mark.unit
def test_a_stream_of_one_batch_is_written_as_a_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    streamed: list[int] = []
    real = operations.insert_stream

    def counted(*args: Any, **kw: Any) -> Any:
        streamed.append(1)
        return real(*args, **kw)

    monkeypatch.setattr(operations, "insert_stream", counted)
    whole, one = _table(tmp_path / "a"), _table(tmp_path / "b")
    data = _rows(0, 2_000)
    w = whole.insert(data)
    o = one.insert(pa.RecordBatchReader.from_batches(data.schema, data.to_batches()))
    assert streamed == []  # one batch: the table path
    assert _files(one, o.time) == _files(whole, w.time)
    one.insert(iter(_rows(2_000, 3_000).to_batches(500)))
    assert streamed == [1]  # two batches or more: streamed
    assert len(_rows_of(one)) == 3_000


def _row_groups(t: Table, instant: str) -> list[int]:
    """Rows per row group of every file the commit wrote."""
    out = []
    for s in t.entry(instant).metadata[WRITE_STATS]:
        md = pq.ParquetFile(pa.BufferReader(t.store.get(s["path"]))).metadata
        out += [md.row_group(i).num_rows for i in range(md.num_row_groups)]
    return out


@pytest.mark.unit
def test_rows_held_past_the_buffer_limit_are_encoded_as_shorter_row_groups(
    tmp_path: Path,
) -> None:
    # 100-row batches over 3 partitions: a partition gains about 33 rows a batch, so without
    # a limit each holds its rows until they fill a 500-row group.
    data = _rows(0, 3_000)
    unbounded = _table(tmp_path / "a")
    # A limit below one batch's rows: after each batch, the partitions holding most encode
    # theirs until what stays held is within it.
    limit = data.slice(0, 40).nbytes
    bounded = _table(tmp_path / "b", write_buffer_limit_bytes=limit)
    u = unbounded.insert(iter(data.to_batches(100)))
    b = bounded.insert(iter(data.to_batches(100)))
    assert max(_row_groups(unbounded, u.time)) == 500
    short = _row_groups(bounded, b.time)
    assert sum(short) == 3_000
    assert max(short) < 100  # never more than a few batches' share held
    assert _rows_of(bounded) == _rows_of(unbounded) == _rows_of(_whole(tmp_path / "c", data))
    # File for file, the same keys, ranges and filters: only the row groups differ.
    assert _files(bounded, b.time) == _files(unbounded, u.time)


@pytest.mark.unit
def test_a_batch_as_big_as_the_buffer_limit_leaves_no_rows_held(tmp_path: Path) -> None:
    # Batches of 900 rows over 3 partitions (300 each) against a limit of about 600 rows:
    # the batch in hand leaves no room within the limit, so each partition's share is
    # encoded as it goes in (as an insert of the batch as a table encodes it), never held
    # beside the batch. One writer thread makes the order of the partitions' writes, and so
    # the row groups, the same each run.
    data = _rows(0, 9_000)
    limit = data.slice(0, 600).nbytes
    t = _table(tmp_path / "t", write_buffer_limit_bytes=limit, write_parallelism=1)
    done = t.insert(iter(data.to_batches(900)))
    stream = t.entry(done.time).metadata["keyed"]["stream"]
    assert stream["batches"] == 10
    assert stream["most_held_bytes"] == 0
    groups = _row_groups(t, done.time)
    assert sum(groups) == 9_000
    assert max(groups) <= 300  # a partition's share of one batch, never more
    assert _rows_of(t) == _rows_of(_whole(tmp_path / "w", data))


@pytest.mark.unit
def test_rows_held_and_the_batch_in_hand_stay_within_the_buffer_limit(tmp_path: Path) -> None:
    # Batches of 100 rows over 3 partitions against a limit of about 600 rows: the rows a
    # partition gathers beyond one batch's share are held, within what the batch in hand
    # (its columns, and more with its meta columns) leaves of the limit.
    data = _rows(0, 3_000)
    limit = data.slice(0, 600).nbytes
    batch = data.slice(0, 100).nbytes
    t = _table(tmp_path / "t", write_buffer_limit_bytes=limit, write_parallelism=1)
    done = t.insert(iter(data.to_batches(100)))
    stream = t.entry(done.time).metadata["keyed"]["stream"]
    assert 0 < stream["most_held_bytes"] <= limit - batch
    groups = _row_groups(t, done.time)
    assert sum(groups) == 3_000
    assert max(groups) > 34  # more than one batch's share of a partition (about 33 rows)
    assert _rows_of(t) == _rows_of(_whole(tmp_path / "w", data))


@pytest.mark.unit
def test_the_next_batch_is_read_once_the_one_before_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A batch read ahead would be a second batch in hand: the source is asked for the next
    # one only when every partition's rows of the one before went into its file.
    events: list[tuple[str, int]] = []
    write = stream_module._Writing.write

    def noted(w: Any, p: Any, rows: pa.Table, positions: np.ndarray) -> None:
        write(w, p, rows, positions)
        events.append(("written", int(rows.column("id")[0].as_py()) // 300))

    monkeypatch.setattr(stream_module._Writing, "write", noted)
    data = _rows(0, 3_000)

    def source() -> Iterator[pa.Table]:
        for i, b in enumerate(data.to_batches(300)):
            events.append(("read", i))
            yield pa.Table.from_batches([b])

    _table(tmp_path / "t").insert(source())
    for n, (what, batch) in enumerate(events):
        if what == "read" and batch >= 2:  # the stream reads two batches to tell one from more
            assert ("written", batch - 1) in events[:n]
            assert sum(1 for e in events[:n] if e == ("written", batch - 1)) == 3
    assert events.count(("read", 9)) == 1


@pytest.mark.unit
@pytest.mark.parametrize("props", [PROPS, KeyedProperties.of("name", partition_by="part")])
def test_a_stream_of_keys_in_no_order_writes_the_filters_one_table_writes(
    tmp_path: Path, props: KeyedProperties
) -> None:
    # Integer ids shuffled (kept as arrays, not progressions, then made text for the
    # filters) and text keys: the same files, ranges and filters as one table insert.
    data = _rows(0, 3_000).take(np.random.default_rng(5).permutation(3_000))
    store = open_store("file://" + str(tmp_path / "a"), StoreSettings(fsync=False))
    whole = Table.create(store, props, TableSettings(**SETTINGS))
    store = open_store("file://" + str(tmp_path / "b"), StoreSettings(fsync=False))
    streamed = Table.create(store, props, TableSettings(**SETTINGS))
    one = whole.insert(data)
    many = streamed.insert(iter(data.to_batches(700)))
    assert _files(streamed, many.time) == _files(whole, one.time)
    assert _rows_of(streamed) == _rows_of(whole)


def _whole(path: Path, data: pa.Table) -> Table:
    t = _table(path)
    t.insert(data)
    return t


@pytest.mark.unit
def test_a_stream_into_a_new_table_compares_integer_keys_as_numbers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ids 0..999 then 1000..1999: as numbers the second batch's range is past the first's, so
    # no key is matched against the keys written; as text ("1000" < "999") they would be.
    matched: list[int] = []
    real = pc.is_in

    def counted(*args: Any, **kw: Any) -> Any:
        matched.append(1)
        return real(*args, **kw)

    monkeypatch.setattr(pc, "is_in", counted)
    t = _table(tmp_path / "t")
    t.insert(iter(_rows(0, 2_000).to_batches(1_000)))
    assert matched == []
    assert len(_rows_of(t)) == 2_000


def _wide(lo: int, hi: int) -> pa.Table:
    """Rows of `PROPS`'s shape built as arrays (no Python objects per row): a big batch."""
    ids = np.arange(lo, hi, dtype=np.int64)
    return pa.table(
        {
            "id": ids,
            "part": pa.array(["p0", "p1", "p2"]).take(pa.array(ids % 3)),
            "ts": np.ones(len(ids), dtype=np.int64),
            "name": pa.array(["n"]).take(pa.array(np.zeros(len(ids), dtype=np.int64))),
        }
    )


@pytest.mark.unit
def test_the_first_batch_is_let_go_once_written(tmp_path: Path) -> None:
    # The table's schema is taken from the first batch's: what is kept of it must not share
    # its buffers, or the first batch is held for the whole stream (as big as any batch).
    # The Arrow bytes alive when the source is asked for a later batch: the open files'
    # encoders and a few small batches, not the first batch.
    base = pa.total_allocated_bytes()
    held = [_wide(0, 1_000_000)]
    first_bytes = pa.total_allocated_bytes() - base
    seen: list[int] = []

    def source() -> Iterator[pa.Table]:
        yield held.pop()
        for i in range(1, 6):
            seen.append(pa.total_allocated_bytes() - base)
            yield _wide(i * 1_000_000, i * 1_000_000 + 1_000)

    t = _table(tmp_path / "t", write_buffer_limit_bytes=1 << 20, parquet_row_group_rows=131_072)
    t.insert(source())
    assert len(t.read(columns=["id"])) == 1_005_000
    # Asked for the second batch, the stream holds the first (it reads two batches to tell
    # one from more); from the third on it holds neither.
    assert seen[0] >= first_bytes
    assert all(b < first_bytes // 2 for b in seen[2:]), [b >> 20 for b in seen]


@pytest.mark.unit
def test_a_closing_file_hashes_its_keys_a_row_group_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Hashing keys for a filter takes several times their bytes in temporaries, on every
    # thread closing a file: a file's keys go in a row group's worth at a time, as a table
    # insert's encoder adds them, and make the filter a table insert makes.
    added: list[int] = []
    real = stream_files.BloomBuilder.add

    def counted(self: Any, keys: Any) -> None:
        added.append(len(keys))
        real(self, keys)

    monkeypatch.setattr(stream_files.BloomBuilder, "add", counted)
    data = _rows(0, 6_000)
    streamed, whole = _table(tmp_path / "s"), _table(tmp_path / "w")
    many = streamed.insert(iter(data.to_batches(3_000)))
    assert added and max(added) <= SETTINGS["parquet_row_group_rows"]
    assert sum(added) == 6_000
    one = whole.insert(data)
    assert _files(streamed, many.time) == _files(whole, one.time)


@pytest.mark.unit
def test_freed_memory_is_handed_back_after_each_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The pages a batch's split and encoding freed go back to the operating system before
    # the next batch is read, not only once the commit is done.
    released: list[int] = []
    batches: list[int] = []

    def noted() -> None:
        released.append(len(batches))

    def source() -> Iterator[pa.Table]:
        for i, b in enumerate(_rows(0, 3_000).to_batches(1_000)):
            batches.append(i)
            yield pa.Table.from_batches([b])

    monkeypatch.setattr(stream_module, "release_unused_memory", noted)
    _table(tmp_path / "t").insert(source())
    # After each batch written (the second was read ahead with the first, to tell one batch
    # from more): the third is read only once the second's memory is handed back.
    assert released == [2, 2, 3]
