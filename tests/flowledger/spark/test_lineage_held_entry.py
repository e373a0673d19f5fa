"""Recording a keyed Spark commit's provenance from the entry its driver committed: no read
of the table's timeline, and the same events as recording it from the timeline."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from flowledger.spark.commit_info import CommitInfo, SparkJobInfo
from flowledger.spark.lineage import record_in
from provenance import ProvenanceRepository, Query, SearchTerm
from storage import StoreSettings, open_store
from tests.support.store_calls import counted_calls
from timeline import Table
from timeline.keyed import KeyedProperties

pytestmark = pytest.mark.unit


def _events(tmp_path: Path, name: str, info: CommitInfo) -> list[tuple[Any, ...]]:
    with ProvenanceRepository.open(open_store(str(tmp_path / name))) as prov:
        assert record_in(prov, info) > 0
        found = prov.query(Query((SearchTerm("component_id", "app-1"),), max_results=100))
        return sorted((e.event_type, e.flowfile_uuid, e.transit_uri) for e in found)


def test_a_held_entry_is_recorded_with_no_read_of_the_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri = f"file://{tmp_path}/t"
    table = Table.create(open_store(uri, StoreSettings(fsync=False)), KeyedProperties.of("id"))
    table.upsert(pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]}))
    instant = table.upsert(pa.table({"id": [2, 4], "v": ["B", "d"]}))
    job = SparkJobInfo("app-1", "bench", "flowledger.write", input_files=("s3://in/a.csv",))
    info = CommitInfo(uri, instant.time, instant.action, "upsert", (), job, keyed=True)
    from_timeline = _events(tmp_path, "repo-a", info)

    table_store = open_store(uri, StoreSettings(fsync=False))
    calls = counted_calls(table_store)
    import flowledger.spark.lineage as lineage

    monkeypatch.setattr(lineage, "open_store", lambda *_a, **_k: table_store)
    held = replace(info, entry=table.tl.entry_of(instant))
    assert _events(tmp_path, "repo-b", held) == from_timeline
    assert sum(calls.values()) == 0, calls
