"""After archival, the table's own reads (snapshot, time travel, timeline, new commits) stay
exactly what they were: archived commits are found through the archive, not lost."""

from __future__ import annotations

import pyarrow as pa
import pytest

from tests.support.backends import Backend
from timeline import Table, TableSettings
from timeline.archive import ArchivalSettings, Archiver, MissingArchiveManifest, read_manifest
from timeline.archive.layout import MANIFEST


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


def test_a_deleted_archive_manifest_is_reported_not_read_as_active(tbackend: Backend) -> None:
    """Without its manifest the archived instants' log positions would pass for active
    completions; the archive files archival wrote show it ran, so the loss is reported."""
    store = tbackend.open().scoped("tables/lost")
    table = Table.open(store, TableSettings())
    for k in range(8):
        table.write(pa.table({"id": [k]}))
    Archiver(table, ArchivalSettings(keep_min_commits=4, keep_max_commits=5)).run()
    store.delete(MANIFEST)
    fresh = Table.open(tbackend.open().scoped("tables/lost"), TableSettings())
    with pytest.raises(MissingArchiveManifest, match=r"archive\.manifest is missing") as err:
        fresh.timeline()
    assert err.value.uri.endswith(MANIFEST)
    with pytest.raises(MissingArchiveManifest):
        fresh.read()
    with pytest.raises(MissingArchiveManifest):
        read_manifest(store)


def test_a_table_never_archived_reads_without_a_manifest(tbackend: Backend) -> None:
    store = tbackend.open().scoped("tables/plain")
    table = Table.open(store, TableSettings())
    table.write(pa.table({"id": [1]}))
    assert read_manifest(store).archived_seqs == ()


def test_a_manifest_created_between_its_read_and_the_listing_is_read_not_reported(
    tbackend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader's GET of the manifest can come before a first run creates it and the LIST
    after the run wrote its files: the manifest is there by then, so it is read, not missing."""
    from storage import NotFound
    from timeline.archive import manifest as manifest_module

    store = tbackend.open().scoped("tables/race")
    table = Table.open(store, TableSettings())
    for k in range(8):
        table.write(pa.table({"id": [k]}))
    Archiver(table, ArchivalSettings(keep_min_commits=4, keep_max_commits=5)).run()
    real = manifest_module.read_document
    gets: list[str] = []

    def before_the_run_then_real(s: object, key: str) -> object:
        gets.append(key)
        if len(gets) == 1:  # the first GET ran before the run created the manifest
            raise NotFound(key)
        return real(s, key)  # type: ignore[arg-type]

    monkeypatch.setattr(manifest_module, "read_document", before_the_run_then_real)
    assert read_manifest(store).archived_seqs
    assert gets == [MANIFEST, MANIFEST]
