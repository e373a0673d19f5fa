"""The archive manifest: one small object updated by compare-and-swap.

It is the serialization point of archivers (a run claims it by CAS before writing, commits by
CAS after its file is durable) and the readers' index: the archive files with their instant-
time ranges (no LIST of the archive folder), the completion positions (`seq`) already
archived (so a loader does not mistake an archived position for a completion whose completed
object is missing), the last archived commit time and the current state checkpoint.
"""

from __future__ import annotations

import bisect
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from storage import (
    Conflict,
    IntegrityError,
    JsonDocument,
    NotFound,
    ObjectStore,
    UnknownOutcome,
    read_document,
    verify,
    write_document,
)

from .errors import ArchiveConflict, ArchiveUnknownOutcome, CorruptArchive, MissingArchiveManifest
from .layout import ARCHIVE, CHECKPOINTS, MANIFEST, parse_archive_key

FORMAT = "flowledger.archive-manifest/1"
_MAX = 1 << 62
ARCHIVE_RUN = "archive"
MERGE_RUN = "merge"


@dataclass(frozen=True)
class ArchiveFile:
    key: str
    min_time: str
    max_time: str
    count: int
    size: int
    #: `crc32:XXXXXXXX` of the file, verified before fastavro sees it ("" = legacy file).
    checksum: str = ""

    def overlaps(self, start: str | None, end: str | None) -> bool:
        return (start is None or self.max_time >= start) and (end is None or self.min_time <= end)

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "min_time": self.min_time,
            "max_time": self.max_time,
            "count": self.count,
            "size": self.size,
            "checksum": self.checksum,
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> ArchiveFile:
        return ArchiveFile(
            str(d["key"]),
            str(d["min_time"]),
            str(d["max_time"]),
            int(d["count"]),
            int(d["size"]),
            str(d.get("checksum", "")),
        )

    def read(self, store: ObjectStore) -> bytes:
        """The file's bytes, checked against the manifest's size and checksum."""
        data = store.get(self.key)
        where = store.url(self.key)
        if len(data) != self.size:
            raise CorruptArchive(
                f"archive file {where} is corrupt: {len(data)} bytes read, the manifest "
                f"recorded {self.size}",
                where,
            )
        try:
            verify(data, self.checksum, where)
        except IntegrityError as exc:
            raise CorruptArchive(f"archive file {exc}", where) from exc
        return data


@dataclass(frozen=True)
class Pending:
    """A claimed archival run or merge. `committed` = its file is in `files` already."""

    kind: str
    plan_key: str
    target: str
    writer: str
    claimed_at: float
    committed: bool = False
    old_checkpoint: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "plan_key": self.plan_key,
            "target": self.target,
            "writer": self.writer,
            "claimed_at": self.claimed_at,
            "committed": self.committed,
            "old_checkpoint": self.old_checkpoint,
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> Pending:
        return Pending(
            str(d["kind"]),
            str(d["plan_key"]),
            str(d["target"]),
            str(d.get("writer", "")),
            float(d.get("claimed_at", 0.0)),
            bool(d.get("committed", False)),
            str(d.get("old_checkpoint", "")),
        )

    def lease_expired(self, lease_ms: int, now: float | None = None) -> bool:
        return ((now or time.time()) - self.claimed_at) * 1000.0 >= lease_ms


def add_ranges(
    ranges: Iterable[tuple[int, int]], seqs: Iterable[int]
) -> tuple[tuple[int, int], ...]:
    """Merge `seqs` into sorted, disjoint, inclusive ranges."""
    spans = sorted([*ranges, *((s, s) for s in seqs)])
    out: list[tuple[int, int]] = []
    for a, b in spans:
        if out and a <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return tuple(out)


@dataclass(frozen=True)
class Manifest:
    files: tuple[ArchiveFile, ...] = ()
    archived_seqs: tuple[tuple[int, int], ...] = ()
    last_archived_time: str = ""
    checkpoint: str = ""
    pending: Pending | None = None
    version: int = 0
    #: None = no manifest object yet (the first run creates it create-only).
    etag: str | None = field(default=None, compare=False)

    def is_archived(self, seq: int | None) -> bool:
        return seq is not None and self.archived_range(seq) is not None

    def archived_range(self, seq: int) -> tuple[int, int] | None:
        """The archived range holding `seq`, if any (ranges are sorted and disjoint)."""
        k = bisect.bisect_right(self.archived_seqs, (seq, _MAX)) - 1
        if k >= 0 and self.archived_seqs[k][0] <= seq <= self.archived_seqs[k][1]:
            return self.archived_seqs[k]
        return None

    @property
    def floor(self) -> int:
        """Every log position at or below this is archived. Positions
        above it may be archived too (`archive_beyond_savepoint`): use `is_archived`."""
        first = self.archived_seqs[0] if self.archived_seqs else None
        return first[1] if first is not None and first[0] <= 1 else 0

    @property
    def newest_time(self) -> str:
        """The newest archived instant time of any action ("" = none): a clean or rollback
        may be archived after the last archived commit (`last_archived_time`)."""
        return max((f.max_time for f in self.files), default="")

    @property
    def instant_count(self) -> int:
        return sum(f.count for f in self.files)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "nonce": uuid.uuid4().hex,  # unique body: a retried CAS is resolved by bytes
            "version": self.version,
            "files": [f.to_json() for f in self.files],
            "archived_seqs": [list(r) for r in self.archived_seqs],
            "last_archived_time": self.last_archived_time,
            "checkpoint": self.checkpoint,
            "pending": self.pending.to_json() if self.pending else None,
        }

    @staticmethod
    def from_document(doc: JsonDocument) -> Manifest:
        d, etag = doc.body, doc.etag
        pending = d.get("pending")
        return Manifest(
            tuple(ArchiveFile.from_json(f) for f in d.get("files", ())),
            tuple((int(a), int(b)) for a, b in d.get("archived_seqs", ())),
            str(d.get("last_archived_time", "")),
            str(d.get("checkpoint", "")),
            Pending.from_json(pending) if isinstance(pending, dict) else None,
            int(d.get("version", 0)),
            etag,
        )

    def evolve(self, **changes: Any) -> Manifest:
        return replace(self, version=self.version + 1, **changes)


def archival_trace(store: ObjectStore) -> str | None:
    """An archive file or checkpoint, if any: objects written only after a run claimed the
    manifest (plans come before the claim and do not count). One LIST, whose prefix covers
    `archive/` and `archive_checkpoints/`, stopped at the first such key."""
    for info in store.list(ARCHIVE.rstrip("/")):
        if parse_archive_key(info.key) is not None or info.key.startswith(CHECKPOINTS):
            return info.key
    return None


def read_manifest(store: ObjectStore) -> Manifest:
    """The manifest; an empty one if archival never ran. `MissingArchiveManifest` if it ran
    and the manifest is gone: the loader would otherwise take every archived instant for an
    active completion (their log positions stay), silently."""
    try:
        doc = read_document(store, MANIFEST)
    except NotFound:
        trace = archival_trace(store)
        if trace is None:
            return Manifest()
        # A first run may have created the manifest and written its files between our GET
        # and LIST: only a manifest still absent after its trace was seen is missing.
        try:
            doc = read_document(store, MANIFEST)
        except NotFound:
            raise MissingArchiveManifest(
                f"the archive manifest {store.url(MANIFEST)} is missing, but archival ran "
                f"(it wrote {store.url(trace)}): archived instants cannot be told from "
                "active ones; restore the manifest from a backup",
                store.url(MANIFEST),
            ) from None
        except IntegrityError as exc:
            raise CorruptArchive(str(exc), store.url(MANIFEST)) from exc
    except IntegrityError as exc:
        raise CorruptArchive(str(exc), store.url(MANIFEST)) from exc
    return Manifest.from_document(doc)


def swap(store: ObjectStore, old: Manifest, new: Manifest) -> Manifest:
    """CAS `old` -> `new`. ArchiveConflict if someone else changed it first."""
    try:
        etag = write_document(store, MANIFEST, new.to_json(), old.etag)
    except Conflict as exc:
        raise ArchiveConflict(
            f"the archive manifest {store.url(MANIFEST)} changed under this run "
            "(another archiver is running); nothing was lost, run again"
        ) from exc
    except UnknownOutcome as exc:
        raise ArchiveUnknownOutcome(
            f"update of {store.url(MANIFEST)} has an unknown outcome; the next run recovers"
        ) from exc
    return replace(new, etag=etag)
