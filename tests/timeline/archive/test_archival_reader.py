"""Archive file format, the lazy archived-timeline reader, merging, corrupted files."""

from __future__ import annotations

import io

import fastavro
import pytest

from tests.support.backends import Backend
from timeline import Table
from timeline.archive import (
    SCHEMA,
    ArchivalSettings,
    ArchivedInstant,
    ArchivedTimeline,
    Archiver,
    CorruptArchive,
    combined_timeline,
    decode_archive,
    encode_archive,
    read_manifest,
)
from timeline.archive.layout import parse_archive_key

NO_MERGE = ArchivalSettings(keep_min_commits=2, keep_max_commits=3, archive_merge_enable=False)


def _commits(table: Table, n: int) -> list[str]:
    out = []
    for _ in range(n):
        txn = table.begin()
        txn.commit()
        out.append(txn.instant_time)
    return out


def _three_files(table: Table) -> list[str]:
    commits = _commits(table, 4)
    Archiver(table, NO_MERGE).run()
    for _ in range(2):
        commits += _commits(table, 2)
        Archiver(table, NO_MERGE).run()
    return commits


@pytest.mark.unit
def test_format_round_trip_and_blocks() -> None:
    recs = [
        ArchivedInstant(f"2026010100000{k:04d}", "commit", "completed", k + 1, "w", b"{}", None)
        for k in range(25)
    ]
    data = encode_archive(list(reversed(recs)), batch_size=10)
    assert decode_archive(data, "mem") == recs  # written time-ordered
    reader = fastavro.block_reader(io.BytesIO(data))
    assert [b.num_records for b in reader] == [10, 10, 5]  # archival_batch_size per block
    meta = fastavro.reader(io.BytesIO(data)).metadata
    assert meta["flowledger.min_time"] == recs[0].time
    assert meta["flowledger.max_time"] == recs[-1].time
    assert [f["name"] for f in SCHEMA["fields"]][:4] == [
        "instant_time",
        "action",
        "state",
        "completion_seq",
    ]
    names_only = decode_archive(data, "mem", with_bodies=False)
    assert [r.time for r in names_only] == [r.time for r in recs]
    assert names_only[0].metadata is None


def test_lazy_reader_loads_only_overlapping_files(tbackend: Backend) -> None:
    table = Table.open(tbackend.open().scoped("t"))
    commits = _three_files(table)
    m = read_manifest(table.store)
    files = sorted(m.files, key=lambda f: f.min_time)
    assert len(files) == 3
    for f in files:  # the range is in the name
        assert parse_archive_key(f.key)[:2] == (f.min_time, f.max_time)  # type: ignore[index]
    reader = ArchivedTimeline(table.store, m)
    table.store.stats.reset()
    middle = reader.records(files[1].min_time, files[1].max_time)
    assert table.store.stats.snapshot().get("GET", 0) == 1
    assert [r.time for r in middle] == commits[2:4]
    table.store.stats.reset()
    assert reader.instant_times(files[1].min_time, files[1].max_time) == commits[2:4]
    assert table.store.stats.snapshot().get("GET", 0) == 0  # cached
    assert reader.timeline().times() == commits[:6]
    assert combined_timeline(table).times() == commits


def test_merge_small_files(tbackend: Backend) -> None:
    table = Table.open(tbackend.open().scoped("t"))
    commits = _three_files(table)
    merge = ArchivalSettings(
        keep_min_commits=2, keep_max_commits=3, archive_merge_files_batch_size=3
    )
    result = Archiver(table, merge).run()
    assert result.merged
    m = read_manifest(table.store)
    assert [f.key for f in m.files] == [result.merged]
    assert ArchivedTimeline(table.store).instant_times() == commits[:6]
    keys = {o.key for o in table.store.list("_timeline/archive/")}
    assert keys == {result.merged}  # candidates and the plan are gone
    # below the batch size nothing is merged
    assert Archiver(table, merge).run().merged == ""


def test_corrupted_archive_file_is_reported_with_its_name(tbackend: Backend) -> None:
    table = Table.open(tbackend.open().scoped("t"))
    _three_files(table)
    victim = read_manifest(table.store).files[1].key
    data = table.store.get(victim)
    table.store.put(victim, data[: len(data) // 2])  # truncated
    with pytest.raises(CorruptArchive, match=victim.rsplit("/", 1)[-1]) as info:
        ArchivedTimeline(table.store).records()
    assert info.value.key.endswith(victim)
    table.store.put(victim, b"not avro at all")
    with pytest.raises(CorruptArchive, match=victim.rsplit("/", 1)[-1]):
        combined_timeline(table)
    # a reader whose range avoids the damaged file is not affected (lazy)
    first = read_manifest(table.store).files[0]
    assert ArchivedTimeline(table.store).records(first.min_time, first.max_time)
