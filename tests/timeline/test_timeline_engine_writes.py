"""The seam engines write through: footer statistics, partition naming, the task-side writer and
the commit of files an engine wrote. Every writer records the same statistics and partition
names for the same rows (timeline's own writer, a task, a file an engine put there)."""

from __future__ import annotations

import io
import pickle
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from storage import NotFound, ObjectStore
from tests.support.backends import Backend
from timeline import (
    HIVE_NAMING,
    LEGACY_NAMING,
    NULL_PARTITION,
    REPLACE_COMMIT,
    DataFile,
    PendingWrite,
    Table,
    TableSettings,
    TaskWriter,
    commit_files,
    data_prefix,
    describe_bytes,
    describe_files,
    footer_stats,
    heartbeat_body,
    parquet_metadata,
    partition_from_stats,
    split_partitions,
    stat_value,
    to_parquet_bytes,
)

PARIS = timezone(timedelta(hours=1))


def _parquet(table: pa.Table, **kwargs: object) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf, **kwargs)  # type: ignore[arg-type]
    return buf.getvalue()


def _typed() -> pa.Table:
    """Row groups of two rows: the second holds one value, the third only nulls."""
    return pa.table(
        {
            "b": pa.array([b"\xff\x00", b"abc", b"\x01", None, None], pa.binary()),
            "d": pa.array(
                [Decimal("9.75"), Decimal("10.50"), Decimal("-1.00"), None, None],
                pa.decimal128(10, 2),
            ),
            "day": pa.array([date(2026, 1, 2), date(2025, 12, 31), date(2026, 3, 1), None, None]),
            "ts": pa.array(
                [
                    datetime(2026, 1, 1, 11, tzinfo=PARIS),
                    datetime(2026, 1, 1, 13, tzinfo=PARIS),
                    datetime(2026, 1, 1, 12, tzinfo=PARIS),
                    None,
                    None,
                ],
                pa.timestamp("us", tz="Europe/Paris"),
            ),
            "local": pa.array(
                [datetime(2026, 1, 1, 10), datetime(2026, 1, 1, 9), None, None, None],
                pa.timestamp("ms"),
            ),
            "s": pa.array(["z", "a", "m", None, None]),
            "all_null": pa.nulls(5, pa.int64()),
            "nested": pa.array([[1], [2], None, None, None], pa.list_(pa.int64())),
        }
    )


@pytest.mark.unit
def test_footer_stats_canonical_json_for_bytes_decimals_dates_timestamps_and_nulls() -> None:
    md = parquet_metadata(_parquet(_typed(), row_group_size=2))
    assert md.num_row_groups == 3
    stats = footer_stats(md)
    # Bytes as hex; compared as bytes (0x01 < "abc" < 0xff00).
    assert stats["b"] == {"nulls": 2, "min": "01", "max": "ff00"}
    # Decimals compared as decimals across row groups ("10.50" < "9.75" as text), scale kept.
    assert stats["d"] == {"nulls": 2, "min": "-1.00", "max": "10.50"}
    assert stats["day"] == {"nulls": 2, "min": "2025-12-31", "max": "2026-03-01"}
    # A zoned timestamp in UTC, whatever the column's zone; a naive one without offset.
    assert stats["ts"] == {
        "nulls": 2,
        "min": "2026-01-01T10:00:00+00:00",
        "max": "2026-01-01T12:00:00+00:00",
    }
    assert stats["local"] == {
        "nulls": 3,
        "min": "2026-01-01T09:00:00",
        "max": "2026-01-01T10:00:00",
    }
    assert stats["s"] == {"nulls": 2, "min": "a", "max": "z"}
    # A row group of nulls only adds nulls: it does not make the range unknown.
    assert stats["all_null"] == {"nulls": 5}
    assert "nested" not in stats  # top-level columns only


@pytest.mark.unit
def test_footer_stats_drop_a_range_a_row_group_does_not_know() -> None:
    data = pa.table({"x": [1, None, 3, 4], "y": [5, 6, 7, 8]})
    md = parquet_metadata(_parquet(data, row_group_size=2, write_statistics=["y"]))
    stats = footer_stats(md)
    assert stats["y"] == {"nulls": 0, "min": 5, "max": 8}
    assert stats["x"] == {}  # no statistics written: neither a range nor a null count


@pytest.mark.unit
def test_stat_value_is_the_canonical_json() -> None:
    assert stat_value(b"\x00\xab") == "00ab"
    assert stat_value(Decimal("1.50")) == "1.50"
    assert stat_value(datetime(2026, 1, 1, 1, tzinfo=PARIS)) == "2026-01-01T00:00:00+00:00"
    assert stat_value(date(2026, 1, 1)) == "2026-01-01"
    assert [stat_value(v) for v in (None, True, 3, 1.5, "x")] == [None, True, 3, 1.5, "x"]


@pytest.mark.unit
def test_timeline_writer_records_the_footer_stats_of_the_bytes_it_wrote(tmp_path: object) -> None:
    from storage import LocalObjectStore

    store = LocalObjectStore(str(tmp_path))
    table = Table.open(store)
    data = _typed().drop_columns(["nested"])
    table.write(data)
    (f,) = table.snapshot().files
    body = store.get(f.path)
    assert dict(f.column_stats) == footer_stats(parquet_metadata(body))
    assert f.column_stats["ts"]["min"] == "2026-01-01T10:00:00+00:00"


@pytest.mark.unit
def test_partition_names_from_rows_and_from_footer_stats_agree() -> None:
    """The Python writers name partitions from row values, the native Spark path from each
    file's footer: the same rows must get the same name either way."""
    data = pa.table(
        {
            "flag": [True, False, None],
            "at": pa.array(
                [datetime(2026, 1, 1, 1, tzinfo=PARIS)] * 2 + [None],
                pa.timestamp("us", "Europe/Paris"),
            ),
            "amount": pa.array([Decimal("1.50"), Decimal("2.00"), None], pa.decimal128(5, 2)),
            "s": ["a b", "c/d", None],
            "v": [1, 2, 3],
        }
    )
    parts = ["flag", "at", "amount", "s"]
    null = NULL_PARTITION
    expected = {
        HIVE_NAMING: [
            "flag=False/at=2026-01-01T00%3A00%3A00+00%3A00/amount=2.00/s=c%2Fd",
            "flag=True/at=2026-01-01T00%3A00%3A00+00%3A00/amount=1.50/s=a%20b",
        ],
        LEGACY_NAMING: [
            "flag=False/at=2026-01-01T00:00:00_00:00/amount=2.00/s=c_d",
            "flag=True/at=2026-01-01T00:00:00_00:00/amount=1.50/s=a_b",
        ],
    }
    for naming, names in expected.items():
        split = split_partitions(data, parts, naming=naming)
        all_null = f"flag={null}/at={null}/amount={null}/s={null}"
        assert [p for p, _ in split] == sorted([*names, all_null])
        for name, piece in split:
            f = describe_bytes("k", to_parquet_bytes(piece))
            assert partition_from_stats(parts, f.column_stats, f.rows, naming=naming) == name
        mixed = describe_bytes("k", to_parquet_bytes(data))
        assert partition_from_stats(parts, mixed.column_stats, mixed.rows, naming=naming) is None


@pytest.fixture
def tstore(tbackend: Backend) -> ObjectStore:
    return tbackend.open().scoped("tables/engine")


def test_tasks_write_files_a_driver_commits_as_add_actions(tstore: ObjectStore) -> None:
    """Plan in one place, write in tasks that share nothing but pickled plain data, commit
    exactly what the tasks described; a stray attempt's file is swept."""
    table = Table.open(tstore)
    txn = table.begin(operation="insert")
    txn.schema = pa.schema([("id", pa.int64()), ("p", pa.string())])
    pending = pickle.loads(pickle.dumps(PendingWrite.detach(txn)))
    target = pickle.loads(pickle.dumps(pending.target))
    described: list[DataFile] = []
    for task in range(2):
        writer = TaskWriter(tstore, target, task=f"{task:05d}-{task}")
        rows = pa.table({"id": [task * 10, task * 10 + 1], "p": ["a", "b"]})
        described += writer.write_partitions(rows, ["p"], naming=table.partition_naming())
    # A failed attempt's file: uploaded, never described.
    stray = TaskWriter(tstore, target, task="00000-99").write(pa.table({"id": [99], "p": ["a"]}))
    assert stray is not None and tstore.head(stray.path)
    files = pickle.loads(pickle.dumps(described))
    assert all(f.checksum.startswith("crc32:") and f.column_stats for f in files)
    assert {f.partition for f in files} == {"p=a", "p=b"}

    resumed = pending.resume(tstore, TableSettings())
    instant = commit_files(resumed, files, extra_metadata={"engine": "test"}, sweep=True)
    table = Table.open(tstore)
    assert table.entry(instant.time).extra["engine"] == "test"
    assert sorted(table.read().column("id").to_pylist()) == [0, 1, 10, 11]
    assert {o.key for o in tstore.list(data_prefix(instant.time))} == {f.path for f in files}
    assert table.schema() == txn.schema

    # A straggling attempt after the commit: its file is deleted again, nothing is returned.
    late = TaskWriter(tstore, target, task="00001-7").write(pa.table({"id": [5], "p": ["a"]}))
    assert late is None
    assert {o.key for o in tstore.list(data_prefix(instant.time))} == {f.path for f in files}


def test_engine_written_files_commit_with_footer_stats_and_overwrite_partitions(
    tstore: ObjectStore,
) -> None:
    """Files an engine put under the prefix (not through a TaskWriter) are described from
    their footers exactly as a writer holding their bytes would; insert_overwrite replaces
    the partitions the files fall in."""
    table = Table.open(tstore)
    table.write(pa.table({"id": [1, 2], "p": ["a", "b"]}), partition_by="p")
    txn = table.begin(REPLACE_COMMIT, operation="insert_overwrite")
    bodies = {}
    for i, ids in enumerate(([7, 8], [9])):
        body = _parquet(pa.table({"id": ids, "p": ["a"] * len(ids)}), row_group_size=1)
        key = f"{data_prefix(txn.instant_time)}p=a/part-{i}.parquet"
        tstore.put(key, body)
        bodies[key] = body
    infos = [tstore.head(k) for k in sorted(bodies)]
    files = describe_files(tstore, infos)
    for f in files:
        held = describe_bytes(f.path, bodies[f.path])
        assert (f, f.column_stats, f.checksum) == (held, held.column_stats, held.checksum)
    commit_files(txn, [replace(f, partition="p=a") for f in files])
    table = Table.open(tstore)
    assert sorted(table.read().column("id").to_pylist()) == [2, 7, 8, 9]


def test_abort_of_a_pending_write_and_its_heartbeat(tstore: ObjectStore) -> None:
    table = Table.open(tstore, TableSettings(heartbeat_interval_ms=1))
    txn = table.begin()
    pending = PendingWrite.detach(txn)
    writer = TaskWriter(tstore, pending.target, guard=False)
    f = writer.write(pa.table({"id": [1]}))
    assert f is not None and writer.beat  # older than the interval: the task beat
    beat_key = f"_timeline/heartbeats/{pending.instant_time}"
    assert tstore.get(beat_key).startswith(f"{pending.writer_id} ".encode())
    assert pending.abort(tstore) is True
    assert not list(tstore.list(data_prefix(pending.instant_time)))
    assert not Table.open(tstore).timeline().pending()

    # After a landed completion, abort leaves the files (an unknown outcome that landed).
    txn = Table.open(tstore).begin()
    pending = PendingWrite.detach(txn)
    writer = TaskWriter(tstore, pending.target)
    done = writer.write(pa.table({"id": [2]}))
    assert done is not None
    commit_files(pending.resume(tstore), [done], heartbeat_written=writer.beat)
    assert pending.abort(tstore) is False
    assert Table.open(tstore).read().column("id").to_pylist() == [2]
    with pytest.raises(NotFound):  # the committer deleted the task's heartbeat
        tstore.get(f"_timeline/heartbeats/{pending.instant_time}")


@pytest.mark.unit
def test_heartbeat_body_names_the_writer_and_the_time() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC).timestamp()
    assert heartbeat_body("w1", now) == f"w1 {now:.3f}".encode()
