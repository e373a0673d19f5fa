"""After archival, the table's own reads (snapshot, time travel, timeline, new commits) stay
exactly what they were: archived commits are found through the archive, not lost."""

from __future__ import annotations

import pyarrow as pa

from tests.support.backends import Backend
from timeline import Table, TableSettings
from timeline.archive import ArchivalSettings, Archiver, read_manifest


def test_reads_after_archival_see_every_commit(tbackend: Backend) -> None:
    store = tbackend.open().scoped("tables/reads")
    table = Table.open(store, TableSettings())
    times = [table.write(pa.table({"id": [k]})).time for k in range(8)]
    before = sorted(table.read().column("id").to_pylist())
    result = Archiver(table, ArchivalSettings(keep_min_commits=4, keep_max_commits=5)).run()
    assert read_manifest(table.tl.store).archived_seqs, result
    fresh = Table.open(tbackend.open().scoped("tables/reads"), TableSettings())
    assert sorted(fresh.read().column("id").to_pylist()) == before == list(range(8))
    active = [i.time for i in fresh.timeline().completed()]
    assert active == times[-len(active) :] and len(active) < len(times)
    assert fresh.snapshot(as_of=times[5]).files  # time travel inside the active range
    fresh.write(pa.table({"id": [8]}))
    assert sorted(Table.open(store, TableSettings()).read().column("id").to_pylist()) == list(
        range(9)
    )
