"""The local entry cache (timeline/entry_cache.py): a fresh process finds the newest commit this
machine wrote without a GET, and a stale, foreign or corrupt file is never an answer."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pyarrow as pa
import pytest

from storage import open_store
from timeline import Table, TableSettings
from timeline.entry_cache import ENV, KEEP, EntryCache
from timeline.table_schema import latest_schema

pytestmark = pytest.mark.unit


def _cache(store_uri: str, root: Path) -> EntryCache:
    return EntryCache(open_store(store_uri).identity, root)


def _fresh_schema_gets(uri: str) -> int:
    """GETs a fresh writer pays to learn the schema (what a new CLI process does)."""
    store = open_store(uri)
    table = Table.open(store)
    store.stats.reset()
    assert latest_schema(table, refresh=False) is not None  # what a write checks
    return store.stats.snapshot().get("GET", 0)


def test_the_next_process_reads_the_newest_entry_from_disk(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    Table.open(open_store(uri)).write(pa.table({"id": [1]}))
    assert _fresh_schema_gets(uri) == 0
    off = Table.open(open_store(uri), TableSettings(local_entry_cache=False))
    off.store.stats.reset()
    assert latest_schema(off, refresh=False) is not None
    assert off.store.stats.snapshot() == {"GET": 1}


def test_a_corrupt_file_is_dropped_and_the_bucket_answers(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    Table.open(open_store(uri)).write(pa.table({"id": [1]}))
    folder = _cache(uri, Path(os.environ[ENV])).folder
    (path,) = folder.glob("*.json")
    path.write_bytes(path.read_bytes().replace(b'"id"', b'"xx"'))
    assert _fresh_schema_gets(uri) == 1  # IntegrityError in the cache: read the object instead
    assert not path.exists()


def test_a_table_written_again_at_the_same_address_is_not_answered_from_old_files(
    tmp_path: Path,
) -> None:
    uri = str(tmp_path / "t")
    Table.open(open_store(uri)).write(pa.table({"id": [1]}))
    shutil.rmtree(uri)
    table = Table.open(open_store(uri))
    table.write(pa.table({"name": ["x"]}))  # same log position, another instant time
    reader = Table.open(open_store(uri))
    schema = latest_schema(reader)
    assert schema is not None and schema.names == ["name"]


def test_keeps_the_newest_entries_and_can_be_turned_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri = str(tmp_path / "t")
    root = tmp_path / "cache"
    store = open_store(uri)
    table = Table.open(store)
    for k in range(KEEP + 3):
        table.write(pa.table({"id": [k]}))
    cache = EntryCache(store.identity, root)
    for i in table.timeline().completed().instants:
        cache.put(table.tl.entry_of(i))
    names = sorted(p.name for p in cache.folder.glob("*.json"))
    assert len(names) == KEEP and names[-1].startswith(f"{KEEP + 3:012d}.")
    monkeypatch.setenv(ENV, "")
    off = EntryCache(store.identity)
    off.put(table.tl.entry_of(table.timeline().completed().instants[-1]))
    assert not off.enabled and off.get(table.timeline().completed().instants[-1]) is None
