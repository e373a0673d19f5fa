"""Loading the archived timeline fast gives the same answers as the plain way."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from storage import StoreSettings, open_store
from timeline import Table, Timeline
from timeline.archive import ArchivalSettings, ArchivedTimeline, Archiver

pytestmark = pytest.mark.unit


def test_archived_timeline_equals_a_sorted_timeline_and_gc_is_restored(tmp_path: Path) -> None:
    table = Table.open(open_store(str(tmp_path / "t"), StoreSettings(fsync=False)))
    settings = ArchivalSettings(keep_min_commits=2, keep_max_commits=3, archive_merge_enable=False)
    for _ in range(4):  # several archive files
        for _ in range(3):
            table.begin().commit()
        Archiver(table, settings).run()
    archived = ArchivedTimeline(table.store)
    assert len(archived.manifest.files) >= 3
    with_bodies = archived.records(with_bodies=True)
    assert all(r.metadata for r in with_bodies)
    expected = Timeline(r.instant for r in with_bodies)  # validated Instants, sorted
    assert gc.isenabled()
    got = archived.timeline()
    assert gc.isenabled()  # loading turns the cyclic GC off only while it builds objects
    assert got.instants == expected.instants
    assert got.completed().instants == expected.completed().instants
    assert [r.time for r in archived.records()] == [r.time for r in with_bodies]
    mid = expected.instants[len(expected) // 2].time
    assert archived.timeline(mid).instants == expected.after_or_equal(mid).instants
