"""The pipeline's copy-on-write table: `planes`, keyed by tail number, written by a streamed
insert (`Table.insert` with a `pyarrow.RecordBatchReader`, docs/tables.md "Streamed inserts"):
the landed CSV is read a block at a time and each batch is written as it arrives, so the
writer never holds the file whole. One `commit`; a key already stored (the pipeline run
again on the same repository) is dropped (`on_duplicate="drop"`), not an error."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa

from timeline import Entry
from timeline.keyed import OnDuplicate

from . import tables as tbl
from .sources import stream_csv

#: CSV bytes per record batch: planes.csv (~250 KB) arrives as a few batches.
BLOCK_SIZE = 64 * 1024


@dataclass(frozen=True)
class StreamedInsert:
    """What the streamed insert committed."""

    table_uri: str
    instant: str
    action: str
    operation: str
    batches: int
    rows_in: int
    #: (file name, file group, rows, bytes) of each base file the commit wrote.
    files: tuple[tuple[str, str, int, int], ...]
    table_rows: int

    @property
    def rows_written(self) -> int:
        return sum(rows for _, _, rows, _ in self.files)


def insert_planes(tables: tbl.Tables, data: bytes) -> tuple[StreamedInsert, Entry]:
    """Stream planes.csv (`data`) into the `planes` table; its result and commit entry."""
    reader = stream_csv(tbl.PLANES, data, BLOCK_SIZE)
    seen = {"batches": 0, "rows": 0}

    def counted() -> Iterator[pa.RecordBatch]:
        for batch in reader:
            seen["batches"] += 1
            seen["rows"] += batch.num_rows
            yield batch

    table = tables.keyed(tbl.PLANES)
    stream = pa.RecordBatchReader.from_batches(reader.schema, counted())
    done = table.insert(stream, on_duplicate=OnDuplicate.DROP)
    entry = table.entry(done.time)
    files = tuple((f.path.rsplit("/", 1)[-1], f.group, f.rows, f.size) for f in entry.added)
    result = StreamedInsert(
        tables.uri(tbl.PLANES),
        entry.time,
        entry.action,
        str(entry.metadata.get("operation", "")),
        seen["batches"],
        seen["rows"],
        files,
        table.snapshot().rows,
    )
    return result, entry
