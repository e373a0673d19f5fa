"""Archive files: Avro object-container files (fastavro), one record per archived instant.

Schema `flowledger.timeline.archive.ArchivedInstant` (documented in docs/archival.md):
instant time, action, state, completion order (the commit-log position), writer, and the
raw bytes of the completed object (commit metadata, JSON `flowledger.timeline/1`) and of the
plan object (requested, or inflight for a savepoint). The file header carries the format
name, the instant-time range and the record count, so a file describes itself; the range is
also in its name, so readers pick files without opening them.
"""

from __future__ import annotations

import io
import json
import operator
from collections.abc import Iterable, Sequence
from typing import Any, Final, NamedTuple, cast

import fastavro
import fastavro.write

from storage import IntegrityError, open_json, seal_json

from ..instant import Instant, State
from ..metadata import Entry
from .errors import CorruptArchive

FORMAT = "flowledger.archive/1"
CODEC = "deflate"

SCHEMA: Final[dict[str, Any]] = {
    "type": "record",
    "name": "ArchivedInstant",
    "namespace": "flowledger.timeline.archive",
    "fields": [
        {"name": "instant_time", "type": "string"},
        {"name": "action", "type": "string"},
        {"name": "state", "type": "string"},
        {"name": "completion_seq", "type": ["null", "long"], "default": None},
        {"name": "writer", "type": "string", "default": ""},
        {"name": "metadata", "type": ["null", "bytes"], "default": None},
        {"name": "plan", "type": ["null", "bytes"], "default": None},
    ],
}
_PARSED = fastavro.parse_schema(SCHEMA)


class ArchivedInstant(NamedTuple):
    """One archived instant as stored in an archive file (bodies as raw bytes). A named
    tuple: immutable, and cheap enough to build 100,000 of in a listing."""

    time: str
    action: str
    state: str
    seq: int | None
    writer: str = ""
    metadata: bytes | None = None
    plan: bytes | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.time, self.action)

    @property
    def instant(self) -> Instant:
        return Instant(self.time, self.action, State(self.state), self.seq)

    def entry(self, where: str = "") -> Entry:
        if self.metadata is None:
            raise CorruptArchive(f"{where}: archived {self.time}.{self.action} has no metadata")
        return Entry.decode(self.metadata, where)

    def to_record(self) -> dict[str, Any]:
        return {
            "instant_time": self.time,
            "action": self.action,
            "state": self.state,
            "completion_seq": self.seq,
            "writer": self.writer,
            "metadata": self.metadata,
            "plan": self.plan,
        }


_new = tuple.__new__
# Avro field -> ArchivedInstant field, in ArchivedInstant's order (other schema fields ignored)
_FIELDS = operator.itemgetter(
    "instant_time", "action", "state", "completion_seq", "writer", "metadata", "plan"
)


def _make(row: list[Any]) -> ArchivedInstant:
    return tuple.__new__(ArchivedInstant, (*row, "", None, None))  # no per-field checks


def encode_archive(records: Sequence[ArchivedInstant], batch_size: int) -> bytes:
    """An Avro container file, one data block per `batch_size` records, time-ordered."""
    if not records:
        raise ValueError("an archive file holds at least one instant")
    ordered = sorted(records, key=lambda r: (r.time, r.action))
    buf = io.BytesIO()
    header = {
        "flowledger.format": FORMAT,
        "flowledger.min_time": ordered[0].time,
        "flowledger.max_time": ordered[-1].time,
        "flowledger.count": str(len(ordered)),
        # A compact index of the records: listing instants reads only the header.
        "flowledger.instants": json.dumps(
            [[r.time, r.action, r.state, r.seq] for r in ordered], separators=(",", ":")
        ),
    }
    writer = fastavro.write.Writer(
        buf, _PARSED, codec=CODEC, metadata=header, sync_interval=1 << 30
    )
    for n, r in enumerate(ordered, 1):
        writer.write(r.to_record())
        if n % batch_size == 0:
            writer.flush()  # ends a data block: Hudi's archival batch
    writer.flush()
    return buf.getvalue()


def decode_archive(data: bytes, where: str, with_bodies: bool = True) -> list[ArchivedInstant]:
    """Every record of an archive file; CorruptArchive (naming `where`) if it is damaged."""
    try:
        buf = io.BytesIO(data)
        reader = fastavro.reader(buf)  # our writer schema: no resolution needed
        header_end = buf.tell()  # the header ends with the file's sync marker
        fmt = reader.metadata.get("flowledger.format")
        if fmt != FORMAT:
            raise CorruptArchive(f"archive file {where}: unsupported format {fmt!r}", where)
        expected = int(reader.metadata.get("flowledger.count", "-1"))
        index = reader.metadata.get("flowledger.instants")
        if not with_bodies and index is not None:
            out = list(map(_make, json.loads(index)))  # rows are [time, action, state, seq]
            if len(out) != expected:
                raise CorruptArchive(f"archive file {where} is corrupt: bad index", where)
            # the records are still checked to be there: a truncated file is reported
            if header_end < 16 or not data.endswith(data[header_end - 16 : header_end]):
                raise CorruptArchive(f"archive file {where} is corrupt: truncated", where)
            return out
        # the writer schema has every field: one C call per record, no per-field checks
        out = [_new(ArchivedInstant, _FIELDS(r)) for r in cast("Iterable[dict[str, Any]]", reader)]
    except CorruptArchive:
        raise
    except Exception as exc:  # fastavro raises many types on damaged input
        raise CorruptArchive(f"archive file {where} is corrupt: {exc!r}", where) from exc
    if expected != len(out):
        raise CorruptArchive(
            f"archive file {where} is corrupt: header says {expected} instants, read {len(out)}",
            where,
        )
    return out


def encode_json(body: dict[str, Any]) -> bytes:
    """Manifest, plans and checkpoints: canonical JSON with a `crc32` field."""
    return seal_json(body)


def decode_json(data: bytes, where: str) -> dict[str, Any]:
    try:
        return open_json(data, where)
    except IntegrityError as exc:
        raise CorruptArchive(str(exc), where) from exc


def dedupe(records: Iterable[ArchivedInstant]) -> list[ArchivedInstant]:
    """One record per (time, action), time-ordered (a merge window may show one twice)."""
    out = list(records)
    prev: tuple[str, str] = ("", "")
    for r in out:  # the usual case: files do not overlap, already ordered and unique
        k = (r.time, r.action)
        if k <= prev:
            break
        prev = k
    else:
        return out
    best: dict[tuple[str, str], ArchivedInstant] = {}
    for r in out:
        best.setdefault((r.time, r.action), r)
    return sorted(best.values(), key=lambda r: (r.time, r.action))
