"""The table loader's requests do not depend on the length of the history: the log (never
shrunk) is probed with GETs, never listed; completions without a completed object are found."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from storage import ObjectStore, StoreSettings, open_store
from timeline import Table, TableSettings
from timeline.archive import ArchivalSettings
from timeline.layout import INSTANTS, instant_key

pytestmark = pytest.mark.unit


class ListingStore:
    """Records the prefix of every LIST."""

    def __init__(self, inner: ObjectStore) -> None:
        self._inner = inner
        self.listed: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def list(self, prefix: str = "", start_after: str | None = None) -> Any:
        self.listed.append(prefix)
        return self._inner.list(prefix, start_after)

    def list_page(self, prefix: str = "", *a: Any, **kw: Any) -> Any:
        self.listed.append(prefix)
        return self._inner.list_page(prefix, *a, **kw)


def _table(tmp_path: Path, commits: int, archive: bool) -> ObjectStore:
    store = open_store(str(tmp_path / "t"), StoreSettings(fsync=False))
    archival = ArchivalSettings(keep_min_commits=3, keep_max_commits=4, auto_archive=archive)
    table = Table.open(store, TableSettings(archival=archival))
    for k in range(commits):
        table.write(pa.table({"id": [k]}))
    return store


@pytest.mark.parametrize("archive", [False, True])
def test_open_never_lists_the_log(tmp_path: Path, archive: bool) -> None:
    store = _table(tmp_path, 12, archive)
    for n in (12, 13):
        counting = ListingStore(store)
        store.stats.reset()
        table = Table.open(counting)  # type: ignore[arg-type]
        assert store.stats.snapshot() == {"LIST": 1}  # the rest waits for a read
        table.timeline(refresh=False)  # completes the load from the same listing
        assert counting.listed == [INSTANTS]
        counts = store.stats.snapshot()
        # LIST instants, (once archived) GET manifest, one GET probing the log's free position
        assert counts == ({"LIST": 1, "GET": 2} if archive else {"LIST": 1, "GET": 1})
        assert len(table.snapshot(refresh=False).files) == n  # archived commits included
        table.write(pa.table({"id": [n]}))


def test_completions_missing_their_object_are_found_in_the_log(tmp_path: Path) -> None:
    store = _table(tmp_path, 5, archive=False)
    table = Table.open(store)
    done = table.timeline().completed()
    last, before_last = done.last(), done.nth_from_last(1)
    assert last is not None and before_last is not None
    # as if the writers crashed after taking their log positions (object not materialized)
    for i in (before_last, last):
        store.delete(instant_key(i))
    reopened = Table.open(store)
    assert [i.time for i in reopened.timeline().completed()] == [i.time for i in done]
    assert len(reopened.snapshot(refresh=False).files) == 5


def test_a_write_plans_on_a_completion_missing_its_object(tmp_path: Path) -> None:
    """A pending instant in the listing may be a completion whose completed object is not
    written yet: then a write loads the log tail before planning its schema on it."""
    store = _table(tmp_path, 2, archive=False)
    table = Table.open(store)
    table.write(pa.table({"id": [2], "extra": ["x"]}))  # widens the schema
    done = table.timeline().completed().last()
    assert done is not None
    store.delete(instant_key(done))  # as if its writer crashed after taking its log position
    listed = Table(store).instants.load().timeline
    assert [i.time for i in listed.pending()] == [done.time]  # pending in a listing
    Table.open(store).write(pa.table({"id": [3]}))
    reopened = Table.open(store)
    schema = reopened.schema()
    assert schema is not None and "extra" in schema.names
    assert reopened.read().num_rows == 4
