"""A keyed merge-on-read table after a first write, a later correction (a delta commit of log
files) and a compaction, with its provenance recorded as the pipeline records it: the files
it leaves current must each lead back to the raw inputs of both writes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from flowledger.pipeline.mor import record_compaction, record_write
from flowledger.slice_provenance import CommitJob, slice_uuid
from provenance import ProvenanceRepository
from storage import open_store
from timeline import Table
from timeline.keyed import KeyedProperties

FIRST = ("file:///raw/flights.csv", "file:///raw/weather.csv")
CORRECTION = ("file:///raw/corrections.csv",)


@dataclass(frozen=True)
class Lake:
    current: list[str]  # FlowFile UUIDs of the files the table's snapshot reads
    repo: str


def compacted_lake(root: Path) -> Lake:
    store = open_store(str(root / "repo"))
    with ProvenanceRepository.open(store) as prov:
        props = KeyedProperties.of("id", table_type="merge_on_read")
        table = Table.create(store.scoped("tables/t"), props)
        first = table.upsert(pa.table({"id": [1, 2, 3, 4], "v": ["a", "b", "c", "d"]}))
        record_write(prov, table, table.entry(first.time), CommitJob(inputs=FIRST))
        fix = table.upsert(pa.table({"id": [2, 3], "v": ["B", "C"]}))
        assert table.entry(fix.time).metadata.get("log_files")  # a delta commit: log files
        record_write(prov, table, table.entry(fix.time), CommitJob(inputs=CORRECTION))
        slices = table.snapshot().merge_on_read_slices() or []
        done = table.maintenance.compact()
        assert done is not None
        record_compaction(prov, table, table.entry(done.time), {sl.group: sl for sl in slices})
        current = [slice_uuid(table.store.url(f.path)) for f in table.files()]
        assert current and not any(sl.logs for sl in table.snapshot().merge_on_read_slices() or [])
    return Lake(current, str(root / "repo"))
