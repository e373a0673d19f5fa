"""Encodings: journals (Arrow IPC, fast to write) and merged Parquet files (sorted,
compressed, row groups as NiFi's block index)."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from storage import IntegrityError, open_blob, seal_blob

from .schema import SCHEMA


def encode_journal(table: pa.Table, compression: str) -> bytes:
    """A journal as an Arrow IPC stream. Measured (bench/provenance.py): 3x faster to write
    than Parquet, which made Parquet encoding the bottleneck of ingest; journals are short
    lived and only ever read whole."""
    sink = pa.BufferOutputStream()
    codec = None if compression == "none" else compression
    options = ipc.IpcWriteOptions(compression=codec)
    with ipc.new_stream(sink, table.schema, options=options) as writer:
        writer.write_table(table)
    # Arrow IPC has no checksum: a CRC trailer makes the journal check itself.
    return seal_blob(memoryview(sink.getvalue()))


def decode_journal(data: bytes, where: str = "journal", rows: int | None = None) -> pa.Table:
    """A journal's events, verified first (IntegrityError naming `where`); `rows` is the count
    its name promises, which also catches a truncated legacy journal (no trailer)."""
    body, checked = open_blob(data, where)
    try:
        table = ipc.open_stream(pa.py_buffer(body)).read_all()
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise IntegrityError(f"{where} is corrupt: {exc}", where) from exc
    if rows is not None and table.num_rows != rows:
        state = "verified" if checked else "without checksum"
        raise IntegrityError(
            f"{where} is corrupt: {table.num_rows} events read ({state}), its name says {rows}",
            where,
        )
    return table


def encode_events_file(
    table: pa.Table, row_group_events: int, compression: str, level: int
) -> bytes:
    """The merged file: sorted by event id; each row group is one seekable block."""
    table = table.sort_by("event_id")
    buf = io.BytesIO()
    with pq.ParquetWriter(
        buf,
        SCHEMA,
        compression=compression,
        compression_level=level,
        # Footer size (parsed on every cold read) grows with statistics: keep those that
        # prune row groups for searches and for DuckDB filters.
        write_statistics=list(STATS_COLUMNS),
        use_dictionary=list(DICTIONARY_COLUMNS),
        write_page_index=False,
        sorting_columns=[pq.SortingColumn(0)],
    ) as writer:
        writer.write_table(table, row_group_size=row_group_events)
    return buf.getvalue()


STATS_COLUMNS = (
    "event_id",
    "event_time",
    "event_type",
    "file_size",
    "component_id",
    "lineage_start_date",
)

#: Columns whose values repeat across events (types, components, queues, claim containers,
#: attribute names): dictionary-encoded. The others (ids, times, UUIDs, sizes, attribute
#: values) are mostly distinct, and a dictionary of 4,096 distinct values only adds a page
#: per column: with one on every column a row group was 60 % bigger and took ~40 % longer
#: to decode, which a lookup does for every row group it reads (measured: docs/benchmarks.md,
#: "Columnar ingest, rollover and FlowFile lookup"). Files written before keep their
#: encoding; readers need not know.
DICTIONARY_COLUMNS = (
    "event_type",
    "component_id",
    "component_type",
    "transit_uri",
    "relationship",
    "source_queue_identifier",
    "content_claim_container",
    "content_claim_section",
    "previous_content_claim_container",
    "previous_content_claim_section",
    "previous_attributes.key_value.key",
    "updated_attributes.key_value.key",
    "source_fields.key_value.key",
)

INDEX_SCHEMA = pa.schema([("term", pa.string()), ("rg", pa.int32())])


def encode_index(terms: pa.Table, row_group_terms: int, compression: str) -> bytes:
    buf = io.BytesIO()
    pq.write_table(
        terms.cast(INDEX_SCHEMA),
        buf,
        compression=compression,
        row_group_size=row_group_terms,
        write_statistics=True,
        # Terms are distinct and row-group numbers short runs: no dictionary (a smaller,
        # ~25 % faster row group to decode, one per lookup and file).
        use_dictionary=False,
        sorting_columns=[pq.SortingColumn(0), pq.SortingColumn(1)],
    )
    return buf.getvalue()
