"""The timeline's public seams (post-commit hooks chosen at open, the commit log's
`changed_since`) and the import structure (no cycles, no private reach-ins)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from storage import ObjectStore, StoreSettings, open_store
from tests.support.paths import REPO_ROOT
from timeline import ArchivalSettings, Table, TableSettings
from timeline.archive import AutoArchive
from timeline.metadata import Entry

pytestmark = pytest.mark.unit
ROOT = REPO_ROOT


def _store(tmp_path: Path) -> ObjectStore:
    return open_store(str(tmp_path / "t"), StoreSettings(fsync=False))


def test_post_commit_hooks_run_in_order_once_per_completed_instant(tmp_path: Path) -> None:
    seen: list[tuple[str, str, int]] = []

    def first(table: Table, entry: Entry) -> None:
        seen.append(("first", entry.time, table.instants.latest_seq))

    def second(table: Table, entry: Entry) -> None:
        seen.append(("second", entry.time, entry.seq))

    table = Table.open(_store(tmp_path), post_commit=[first, second])
    a = table.write(pa.table({"id": [1]}))
    b = table.write(pa.table({"id": [2]}))
    assert seen == [
        ("first", a.time, 1),
        ("second", a.time, 1),
        ("first", b.time, 2),
        ("second", b.time, 2),
    ]


def test_settings_choose_automatic_archival_when_the_table_is_built(tmp_path: Path) -> None:
    on = Table(_store(tmp_path))
    assert [type(h) for h in on.post_commit] == [AutoArchive]
    hook = on.post_commit[0]
    assert isinstance(hook, AutoArchive) and hook.settings == ArchivalSettings()
    off = TableSettings(archival=ArchivalSettings(auto_archive=False))
    assert Table(_store(tmp_path), off).post_commit == []


def test_changed_since_is_one_head_and_sees_other_writers(tmp_path: Path) -> None:
    store = _store(tmp_path)
    mine = Table.open(store)
    mine.write(pa.table({"id": [1]}))
    seq = mine.instants.latest_seq
    store.stats.reset()
    assert not mine.instants.changed_since(seq)
    assert store.stats.snapshot().get("HEAD") == 1
    Table.open(store).write(pa.table({"id": [2]}))  # another writer
    assert mine.instants.changed_since(seq)
    assert not mine.instants.changed_since(seq + 1)


def test_data_instant_time_reads_the_time_data_key_wrote() -> None:
    from timeline import data_instant_time
    from timeline.layout import data_key

    key = data_key("20240102030405678", "events", "f.parquet")
    assert data_instant_time(key) == "20240102030405678"
    assert data_instant_time("provenance/table/" + key) == "20240102030405678"
    assert data_instant_time("data/not-a-time/f.parquet") is None
    assert data_instant_time("_timeline/log/00000000000000000001") is None
