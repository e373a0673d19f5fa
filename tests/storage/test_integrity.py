"""Checksums on every committed object : a flipped bit or a truncation in
one object of each kind is an IntegrityError naming that object, never wrong rows, a changed
count or a crash in native code. Also the event-id allocator's check
against the data at start-up."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from provenance import ProvenanceEvent, ProvenanceRepository, ProvenanceSettings, Query, SearchTerm
from provenance.ids import ALLOCATOR_KEY
from storage import IntegrityError, ObjectStore, StoreSettings, open_store
from storage.content import ClaimLedger, LedgerBatch
from storage.content.ledger import BATCHES, CHECKPOINT
from tests.support.servers import S3Endpoint
from timeline import Table
from timeline.archive import ArchivalSettings, ArchivedTimeline, Archiver, read_manifest
from timeline.recovery import read_plan

TABLE = "tables/t"
ARCHIVE = ArchivalSettings(keep_min_commits=2, keep_max_commits=3, archive_merge_enable=False)


def ev(i: int) -> ProvenanceEvent:
    return ProvenanceEvent(
        event_type="RECEIVE",
        flowfile_uuid=f"00000000-0000-0000-0000-{i:012d}",
        component_id="c",
        component_type="t",
        file_size=100 + i,
        event_time=1_700_000_000_000 + i,
        transit_uri="nifi://unit-test",
    )


def psettings(cache: Path) -> ProvenanceSettings:
    # Journals as one object per flush, damaged anywhere; damage to a local journal log (a
    # torn tail is no damage, a bad middle block is): test_provenance_journal_log.py.
    return ProvenanceSettings(cache_dir=str(cache), row_group_events=4, journal_log_bytes=0)


def build(store: ObjectStore, cache: Path) -> None:
    """One small repository holding an object of every kind."""
    repo = ProvenanceRepository.open(store, psettings(cache))
    repo.register_events([ev(i) for i in range(12)], sync=True)
    repo.rollover()  # events file + term index + provenance timeline
    repo.register_events([ev(i) for i in range(12, 15)], sync=True)  # an unmerged journal
    repo.close()
    table = Table.open(store.scoped(TABLE))
    for n in range(6):
        table.write(pa.table({"k": [n, n + 1], "v": [f"a{n}", f"b{n}"]}))
    Archiver(table, ARCHIVE).run()  # archive file, manifest, checkpoint
    ledger = ClaimLedger(store.scoped("content"), "w")
    ledger.append(LedgerBatch(1.0, {"c/1/x": (10, 1.0)}, {"c/1/x": 1}))
    assert ledger.checkpoint()
    ledger.append(LedgerBatch(2.0, {}, {"c/1/x": 1}))


def _first(store: ObjectStore, prefix: str, suffix: str = "", skip: int = 0) -> str:
    keys = [o.key for o in store.list(prefix) if o.key.endswith(suffix)]
    assert len(keys) > skip, f"no object under {prefix}*{suffix}"
    return keys[skip]


def _table(store: ObjectStore) -> Table:
    return Table.open(store.scoped(TABLE))


def _active_commit(store: ObjectStore) -> str:
    return _first(store, f"{TABLE}/_timeline/instants/", "", 0)


# kind -> (find the object's key, read it the way users do)
Finder = Callable[[ObjectStore], str]
Reader = Callable[[ObjectStore, Path], Any]


def _completed(store: ObjectStore) -> str:
    return next(
        o.key for o in store.list(f"{TABLE}/_timeline/instants/") if ".commit.completed." in o.key
    )


def _log_of_completed(store: ObjectStore) -> str:
    key = _completed(store)
    seq = int(key.rsplit(".", 1)[1])
    store.delete(key)  # not materialized yet: the loader reads the commit log instead
    return f"{TABLE}/_timeline/log/{seq:020d}"


def _requested(store: ObjectStore) -> str:
    return next(
        o.key
        for o in store.list(f"{TABLE}/_timeline/instants/")
        if o.key.endswith(".commit.requested")
    )


def _read_plan(store: ObjectStore, _: Path) -> Any:
    from timeline.instant import parse_name

    table = _table(store)
    inst = parse_name(_requested(store).rsplit("/", 1)[1])
    return read_plan(table, inst)


def _prov(store: ObjectStore, cache: Path) -> ProvenanceRepository:
    return ProvenanceRepository.open(store, psettings(cache), recover=False)


KINDS: dict[str, tuple[Finder, Reader]] = {
    "journal": (
        lambda s: _first(s, "provenance/journals/"),
        lambda s, c: _prov(s, c).get_events(0, 100),
    ),
    "events file (ranged read)": (
        lambda s: _first(s, "provenance/table/data/", "/events/00000000000000000000.parquet"),
        lambda s, c: _prov(s, c).get_events(0, 100),
    ),
    "events file (local cache fill)": (
        lambda s: _first(s, "provenance/table/data/", "/events/00000000000000000000.parquet"),
        lambda s, c: _prov(s, c).sql("select count(*) from provenance"),
    ),
    "term index": (
        lambda s: _first(s, "provenance/table/data/", "/index/00000000000000000000.parquet"),
        lambda s, c: _prov(s, c).query(
            Query((SearchTerm("flowfile_uuid", "00000000-0000-0000-0000-000000000003"),))
        ),
    ),
    # Reading it; a writer instead rebuilds it past the data (it is written without fsync, so
    # a machine crash may tear it): tests/provenance/test_provenance_fsync.py.
    "id allocator": (
        lambda s: f"provenance/{ALLOCATOR_KEY}",
        lambda s, c: _prov(s, c).ids.peek(),
    ),
    "table data file": (
        lambda s: _first(s, f"{TABLE}/data/", ".parquet", skip=5),
        lambda s, c: _table(s).read(),
    ),
    "completed instant": (_completed, lambda s, c: _table(s).read()),
    "commit-log body": (_log_of_completed, lambda s, c: _table(s).read()),
    "instant plan": (_requested, _read_plan),
    "archive file": (
        lambda s: _first(s, f"{TABLE}/_timeline/archive/", ".avro"),
        lambda s, c: ArchivedTimeline(s.scoped(TABLE)).records(with_bodies=True),
    ),
    "archive manifest": (
        lambda s: f"{TABLE}/_timeline/archive.manifest",
        lambda s, c: read_manifest(s.scoped(TABLE)),
    ),
    "archive checkpoint": (
        lambda s: _first(s, f"{TABLE}/_timeline/archive_checkpoints/"),
        lambda s, c: _table(s).read(),
    ),
    "ledger batch": (
        lambda s: _first(s, f"content/{BATCHES}"),
        lambda s, c: ClaimLedger(s.scoped("content"), "r").refresh(),
    ),
    "ledger checkpoint": (
        lambda s: f"content/{CHECKPOINT}",
        lambda s, c: ClaimLedger(s.scoped("content"), "r").refresh(),
    ),
}


def damage(store: ObjectStore, key: str, how: str) -> None:
    data = bytearray(store.get(key))
    at = len(data) * 2 // 3  # away from the front, where a JSON document's crc32 sorts
    if how == "flip":
        data[at] ^= 0x10
    else:
        del data[at:]
    store.put(key, bytes(data))


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("integrity") / "repo"
    build(open_store("file://" + str(root), StoreSettings(fsync=False)), root.parent / "cache0")
    return root


@pytest.mark.unit
@pytest.mark.parametrize("how", ["flip", "truncate"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_damaged_object_is_an_integrity_error_naming_it(
    kind: str, how: str, template: Path, tmp_path: Path
) -> None:
    root = tmp_path / "repo"
    shutil.copytree(template, root)
    store = open_store("file://" + str(root), StoreSettings(fsync=False))
    find, read = KINDS[kind]
    read(store, tmp_path / "cache-ok")  # intact: reads fine
    key = find(store)
    damage(store, key, how)
    with pytest.raises(IntegrityError) as err:
        read(store, tmp_path / "cache")
    assert key in str(err.value), str(err.value)


@pytest.mark.s3
def test_damaged_events_file_on_s3_is_an_integrity_error(moto: S3Endpoint, tmp_path: Path) -> None:
    store = open_store(f"s3://{moto.new_bucket()}/repo", moto.settings())
    build(store, tmp_path / "cache0")
    find, read = KINDS["events file (ranged read)"]
    key = find(store)
    damage(store, key, "flip")
    with pytest.raises(IntegrityError) as err:
        read(store, tmp_path / "cache")
    assert key in str(err.value)


@pytest.mark.unit
def test_allocator_behind_the_data_is_repaired_forward(tmp_path: Path) -> None:
    store = open_store("file://" + str(tmp_path / "repo"), StoreSettings(fsync=False))
    repo = ProvenanceRepository.open(store, psettings(tmp_path / "cache"))
    repo.register_events([ev(i) for i in range(10)], sync=True)
    repo.rollover()  # ids 0-9 committed
    repo.register_events([ev(i) for i in range(10, 15)], sync=True)  # ids 10-14 in a journal
    repo.close()
    # The allocator document restored from an old copy: behind both the file and the journal.
    store.put(f"provenance/{ALLOCATOR_KEY}", json.dumps({"next_event_id": 3}).encode())
    repo = ProvenanceRepository.open(store, psettings(tmp_path / "cache"))
    new = repo.register_events([ev(i) for i in range(100, 104)], sync=True)
    assert min(new) >= 15  # repaired forward past the journal, never reused
    repo.close()
    repo = ProvenanceRepository.open(store, psettings(tmp_path / "cache"))  # recovery again
    events = repo.get_events(0, 1000)
    ids = [e.event_id for e in events]
    assert len(ids) == len(set(ids)) == 19
    by_uuid = {e.flowfile_uuid: e.event_id for e in events}
    for i in [*range(15), *range(100, 104)]:  # every acknowledged event, old and new
        assert f"00000000-0000-0000-0000-{i:012d}" in by_uuid
    repo.close()


@pytest.mark.unit
def test_sealed_documents_and_blobs_round_trip_and_catch_damage() -> None:
    from storage import open_blob, open_json, seal_blob, seal_json

    for doc in ({}, {"b": [1, 2.5, None], "a": {"z": "é"}}):
        data = seal_json(doc)
        assert open_json(data, "doc") == doc
        assert json.loads(data)["crc32"].startswith("crc32:")  # still plain JSON
        for at in range(len(data)):
            bad = bytearray(data)
            bad[at] ^= 0x01
            try:
                assert open_json(bytes(bad), "doc") == doc  # only a damaged field name
            except IntegrityError as exc:
                assert "doc" in str(exc)
    assert open_json(b'{"legacy": 1}', "doc") == {"legacy": 1}
    blob = seal_blob(b"payload")
    assert bytes(open_blob(blob, "j")[0]) == b"payload" and open_blob(blob, "j")[1]
    with pytest.raises(IntegrityError, match="j is corrupt"):
        open_blob(b"paxload" + blob[7:], "j")
    assert open_blob(b"legacy", "j") == (b"legacy", False)


@pytest.mark.unit
def test_row_group_outside_the_footer_read_is_verified(tmp_path: Path) -> None:
    """A row group fetched by its own ranged GET (not with the footer) is checked too, and a
    damaged one never enters the block cache."""
    store = open_store("file://" + str(tmp_path / "repo"), StoreSettings(fsync=False))
    s = ProvenanceSettings(cache_dir=str(tmp_path / "cache"), row_group_events=500)
    repo = ProvenanceRepository.open(store, s)
    repo.register_events(
        # Incompressible details: the file must stay bigger than the footer read however
        # its columns are encoded.
        [replace(ev(i), details=hashlib.sha256(b"%d" % i).hexdigest() * 2) for i in range(6000)],
        sync=True,
    )
    repo.rollover()
    repo.close()
    key = _first(store, "provenance/table/data/", "/events/00000000000000000000.parquet")
    assert store.head(key).size > 2 * 64 * 1024  # row group 0 is far from the footer read
    data = bytearray(store.get(key))
    data[100] ^= 0x04  # inside row group 0
    store.put(key, bytes(data))
    repo = ProvenanceRepository.open(store, s, recover=False)
    assert [e.event_id for e in repo.get_events(5900, 10)] == list(range(5900, 5910))
    for _ in range(2):  # the second attempt must not be served a cached damaged block
        with pytest.raises(IntegrityError) as err:
            repo.get_events(0, 10)
        assert key in str(err.value)
    repo.close()
