"""Reading events from files: JSON lines with the view's field names, or NiFi's own
provenance JSON as its SiteToSiteProvenanceReportingTask sends it (a JSON array, or one
record per line), so NiFi history can be brought in.

`ingest_file` is all or nothing and streams (memory holds one batch, not the file):

1. Validate every record (types of every field, then NiFi's rules; an error names the line
   and the field) and spill the validated events, in Arrow batches, to a local temporary
   Arrow IPC file. Nothing is written to the repository during this pass.
2. Refuse a NiFi export whose `eventId`s are already in the repository (or repeated in the
   file): re-ingesting the same export must not duplicate it.
3. Stage the batches as invisible parts and commit them with one manifest
   (provenance/staging.py): every event becomes visible at once, or none does.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import IO, TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
from pydantic import ValidationError

from .errors import IngestError, InvalidEvent
from .event import ProvenanceEvent, now_ms, problem
from .records import EventRecord, NifiExtras, describe, record, row
from .reingest import IDS_SCHEMA, first_repeat
from .schema import SCHEMA, truncate_map

if TYPE_CHECKING:
    from .repository import ProvenanceRepository

#: NiFi's site-to-site provenance record field -> our field.
NIFI_FIELDS = MappingProxyType(
    {
        "eventType": "event_type",
        "timestampMillis": "event_time",
        "durationMillis": "event_duration_ms",
        "lineageStart": "lineage_start_date",
        "details": "details",
        "componentId": "component_id",
        "componentType": "component_type",
        "entityId": "flowfile_uuid",
        "entitySize": "file_size",
        "previousEntitySize": "previous_file_size",
        "updatedAttributes": "updated_attributes",
        "previousAttributes": "previous_attributes",
        "parentIds": "parent_uuids",
        "childIds": "child_uuids",
        "transitUri": "transit_uri",
        "alternateIdentifier": "alternate_identifier_uri",
        "remoteIdentifier": "source_system_flowfile_identifier",
        "relationship": "relationship",
        "sourceQueueIdentifier": "source_queue_identifier",
    }
)
NIFI_NAMES = MappingProxyType({v: k for k, v in NIFI_FIELDS.items()})
#: Carried by NiFi's export with no column here: kept in `source_fields` (the NiFi event id
#: is reassigned; its `eventId` detects a re-ingest).
NIFI_KEPT = frozenset(NifiExtras.model_fields)
SOURCE_ID = "eventId"
BATCH_EVENTS = 10_000
#: Python's JSON decoder recurses per nesting level; no provenance record nests this deep.
TOO_DEEP = "JSON nested too deeply"


def is_nifi(record: Mapping[str, Any]) -> bool:
    return "eventType" in record and ("entityId" in record or "eventOrdinal" in record)


def nifi_record(rec: Mapping[str, Any]) -> EventRecord:
    out: dict[str, Any] = {}
    kept: dict[str, Any] = {}
    for key, value in rec.items():
        if key in NIFI_FIELDS:
            out[NIFI_FIELDS[key]] = value
        elif key in NIFI_KEPT:
            kept[key] = value
        else:
            raise InvalidEvent(f"{key}: unknown NiFi provenance field")
    try:
        extras = NifiExtras.model_validate(kept)
    except ValidationError as exc:
        raise InvalidEvent(describe(exc)) from None
    if out.get("event_time") is None and extras.timestamp:
        out["event_time"] = extras.timestamp
    # NiFi's export has no relationship: keep ROUTE events importable and say so.
    if out.get("event_type") == "ROUTE" and not out.get("relationship"):
        out["relationship"] = "(not in NiFi export)"
    out["source_fields"] = {
        k: v if isinstance(v, str) else str(v)
        for k, v in kept.items()
        if v is not None and v != "" and k != "timestamp"
    }
    try:
        validated = EventRecord.model_validate(out)
    except ValidationError as exc:
        raise InvalidEvent(describe(exc, NIFI_NAMES)) from None
    why = problem(validated)
    if why is not None:
        raise InvalidEvent(why)
    return validated


def from_nifi(rec: Mapping[str, Any]) -> ProvenanceEvent:
    return ProvenanceEvent(**row(nifi_record(rec), now_ms()) | {"event_id": -1})


def from_record(rec: Mapping[str, Any]) -> ProvenanceEvent:
    return ProvenanceEvent(**row(record(rec), now_ms()) | {"event_id": -1})


#: A JSON escape of a UTF-16 surrogate (`\\ud800`..`\\udfff`): legal JSON, but alone it
#: decodes to a string no UTF-8 writer accepts. Only a record whose text has one is checked.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abcdefABCDEF]")


def _check_text(rec: Any, text: str, where: str) -> None:
    """A lone surrogate named by line and field, before it fails deep inside a writer."""
    if not isinstance(rec, dict) or not _SURROGATE_ESCAPE.search(text):
        return
    for key, value in rec.items():
        try:
            json.dumps({key: value}, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as exc:
            bad = exc.object[exc.start : exc.end].encode("unicode_escape").decode()
            raise IngestError(
                f"{where}: {key}: holds a lone UTF-16 surrogate ({bad}), which is not text"
            ) from None


def _validated(rec: Any, where: str, text: str = "") -> EventRecord:
    if not isinstance(rec, dict):
        raise IngestError(f"{where}: expected a JSON object")
    _check_text(rec, text, where)
    try:
        return nifi_record(rec) if is_nifi(rec) else record(rec)
    except InvalidEvent as exc:
        raise IngestError(f"{where}: {exc}") from None


def _array_items(stream: IO[str], chunk: int = 1 << 16) -> Iterator[Any]:
    """The elements of a JSON array, decoded one at a time (the `[` already consumed)."""
    for item, _ in _array_texts(stream, chunk):
        yield item


def _array_texts(stream: IO[str], chunk: int = 1 << 16) -> Iterator[tuple[Any, str]]:
    """`_array_items`, each element with its text."""
    decoder = json.JSONDecoder()
    buf, pos, n = "", 0, 0
    while True:
        while True:  # skip separators
            while pos < len(buf) and (buf[pos].isspace() or (buf[pos] == "," and n)):
                pos += 1
            if pos < len(buf):
                break
            more = stream.read(chunk)
            if not more:
                raise IngestError("not a JSON array of provenance records: no closing ]")
            buf, pos = buf[pos:] + more, 0
        if buf[pos] == "]":
            return
        while True:
            try:
                item, end = decoder.raw_decode(buf, pos)
                break
            except RecursionError:
                raise IngestError(f"record {n + 1}: {TOO_DEEP}") from None
            except ValueError as exc:
                more = stream.read(chunk)
                if not more:
                    raise IngestError(f"record {n + 1}: not JSON: {exc}") from None
                buf, pos = buf[pos:] + more, 0
        n += 1
        yield item, buf[pos:end]
        buf, pos = buf[end:], 0


def iter_records(stream: IO[str]) -> Iterator[tuple[str, EventRecord]]:
    """(where, validated record) for a JSON-lines file (ours or NiFi's) or a JSON array."""
    head = stream.read(1)
    while head and head.isspace():
        head = stream.read(1)
    if head == "[":
        for i, (rec, text) in enumerate(_array_texts(stream), 1):
            yield f"record {i}", _validated(rec, f"record {i}", text)
        return
    for n, line in enumerate(_lines(head, stream), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError as exc:
            raise IngestError(f"line {n}: not JSON: {exc}") from None
        except RecursionError:
            raise IngestError(f"line {n}: {TOO_DEEP}") from None
        yield f"line {n}", _validated(rec, f"line {n}", line)


def read_events(stream: IO[str]) -> Iterator[ProvenanceEvent]:
    """Events of a JSON-lines file (ours or NiFi's) or a JSON array (NiFi's export)."""
    now = now_ms()
    for _, rec in iter_records(stream):
        yield ProvenanceEvent(**row(rec, now) | {"event_id": -1})


def _lines(head: str, stream: IO[str]) -> Iterator[str]:
    first = head + stream.readline()
    yield first
    yield from stream


@dataclass(frozen=True)
class IngestResult:
    events: int
    first_event_id: int | None
    last_event_id: int | None
    parts: int


@dataclass
class _Spilled:
    rows: int = 0
    start: int = 0
    end: int = 0
    #: Source ids (NiFi eventIds) and where each is (`label` and number), in a local file.
    ids: int = 0
    label: str = "line"


def _to_table(rows: list[dict[str, Any]], max_attribute_length: int) -> pa.Table:
    t = pa.Table.from_pylist(rows, schema=SCHEMA)
    for name in ("previous_attributes", "updated_attributes"):
        i = t.schema.get_field_index(name)
        t = t.set_column(i, name, truncate_map(t.column(name), max_attribute_length))
    return t


def _spill(
    stream: IO[str], sink: Path, ids_sink: Path, max_attribute_length: int, batch: int
) -> _Spilled:
    """Pass 1: validate every record, writing validated batches to a local Arrow IPC file and
    the source ids (with their line numbers) to a local Parquet file: memory holds a batch."""
    out = _Spilled()
    now = now_ms()
    rows: list[dict[str, Any]] = []
    ids: list[str] = []
    places: list[int] = []
    times: list[int] = []
    # lz4: the spill of 2M events is ~1 GB uncompressed.
    options = ipc.IpcWriteOptions(compression="lz4")
    with (
        ipc.new_file(str(sink), SCHEMA, options=options) as writer,
        pq.ParquetWriter(str(ids_sink), IDS_SCHEMA) as ids_writer,
    ):

        def flush() -> None:
            if rows:
                writer.write_table(_to_table(rows, max_attribute_length))
                out.start = min([out.start, *times] if out.rows else times)
                out.end = max([out.end, *times] if out.rows else times)
                out.rows += len(rows)
            if ids:
                ids_writer.write_table(pa.table([ids, places], schema=IDS_SCHEMA))
                out.ids += len(ids)
            for pending in (rows, ids, places, times):
                pending.clear()

        for where, rec in iter_records(stream):
            r = row(rec, now)
            rows.append(r)
            times.append(r["event_time"])
            source_id = r["source_fields"].get(SOURCE_ID)
            if source_id:
                ids.append(source_id)
                out.label, number = where.split(" ", 1)
                places.append(int(number))
            if len(rows) >= batch:
                flush()
        flush()
    return out


def _batches(spill: Path, max_events: int) -> Iterator[pa.Table]:
    """Pass 2: the spilled events in tables of at most `max_events` (one part each)."""
    # Read, not memory-mapped: mapped pages would stay resident (and count) until unmapped.
    with pa.OSFile(str(spill)) as source:
        reader = ipc.open_file(source)
        pending: list[pa.RecordBatch] = []
        rows = 0
        for i in range(reader.num_record_batches):
            b = reader.get_batch(i)
            while b.num_rows:
                take = min(b.num_rows, max_events - rows)
                pending.append(b.slice(0, take))
                rows += take
                b = b.slice(take)
                if rows == max_events:
                    yield pa.Table.from_batches(pending, SCHEMA)
                    pending, rows = [], 0
        if rows:
            yield pa.Table.from_batches(pending, SCHEMA)


def ingest_file(
    repo: ProvenanceRepository, path: Path, *, batch_events: int = BATCH_EVENTS
) -> IngestResult:
    """Register every event of `path`, or none (see the module docstring)."""
    settings = repo.settings
    with tempfile.TemporaryDirectory(prefix="flowledger-ingest-") as tmp:
        spill, ids_file = Path(tmp) / "events.arrow", Path(tmp) / "source-ids.parquet"
        try:
            with open(path, encoding="utf-8") as fh:
                found = _spill(fh, spill, ids_file, settings.max_attribute_length, batch_events)
        except UnicodeDecodeError as exc:
            raise IngestError(f"{path.name} is not UTF-8 text: {exc}") from None
        if found.rows == 0:
            return IngestResult(0, None, None, 0)
        if found.ids:
            repeat = first_repeat(ids_file, Path(tmp))
            if repeat is not None:
                v, first, last = repeat
                raise IngestError(
                    f"{found.label} {last}: NiFi {SOURCE_ID} {v} appears again (first on "
                    f"{found.label} {first}); nothing was written"
                )
            present, example = repo.count_present(ids_file, SOURCE_ID, found.start, found.end)
            if present:
                raise IngestError(
                    f"{present} of the {found.ids} events of {path.name} were already "
                    f"ingested (same NiFi {SOURCE_ID}, e.g. {example}); nothing was written"
                )
        done = repo.register_staged(_batches(spill, settings.journal_max_events))
    return IngestResult(found.rows, done.first_id, done.end_id - 1, len(done.parts))
