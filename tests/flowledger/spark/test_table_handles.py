"""The table handles a session's keyed writes keep: the next write takes the kept handle
with no request to the store; a handle in use is not shared; a forgotten one is opened
again."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import flowledger.spark.table_handles as handles
from storage import StoreSettings, open_store
from timeline import Table, TableSettings
from timeline.keyed import KeyedProperties

pytestmark = pytest.mark.unit


class _Session:
    """Stands for a Spark session: handles are kept as an attribute of it."""


def _counted_opens(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    opened: Counter[str] = Counter()
    inner = open_store

    def counted(uri: str, settings: Any = None) -> Any:
        opened[uri] += 1
        return inner(uri, settings)

    monkeypatch.setattr(handles, "open_store", counted)
    return opened


def test_a_kept_handle_is_taken_again_and_not_shared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri = f"file://{tmp_path}/t"
    Table.create(open_store(uri, StoreSettings(fsync=False)), KeyedProperties.of("id"))
    key = (uri, StoreSettings(fsync=False), TableSettings())
    opened = _counted_opens(monkeypatch)
    spark = _Session()
    first = handles.take_table(spark, key)
    other = handles.take_table(spark, key)  # the first is in use: a handle of its own
    assert other is not first and opened[uri] == 2
    handles.keep_table(spark, key, first)
    # The same settings made again (a new writer id each time) find the kept handle.
    again_key = (uri, StoreSettings(fsync=False), TableSettings())
    assert handles.take_table(spark, again_key) is first and opened[uri] == 2
    handles.keep_table(spark, key, first)
    assert handles.take_table(_Session(), key) is not first  # another session's own
    handles.forget_tables(spark)
    again = handles.take_table(spark, key)
    assert again is not first and again.properties == first.properties
    assert opened[uri] == 4
