"""Commit metadata: data files, commit-log entries and their versioned JSON schema.

Schema `flowledger.timeline/1` (documented in docs/timeline-protocol.md). The body of a
commit-log entry and of the completed instant object are the same bytes, so whoever
materializes a completion (its writer or a helper) writes identical objects.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from storage import open_json, seal_json

from .errors import CorruptTimelineObject, TimelineError
from .instant import COMMIT_ACTIONS, WRITE_ACTIONS, validate_time

FORMAT = "flowledger.timeline/1"


@dataclass(frozen=True)
class DataFile:
    """One immutable data file of a table, as recorded in commit metadata."""

    path: str
    size: int
    rows: int
    partition: str = ""
    #: Hudi file group id; a newer file in the same group supersedes the older (a file slice).
    #: Empty = the file is its own group.
    file_group: str = ""
    #: column -> {"min": v, "max": v, "nulls": n} (JSON values).
    column_stats: Mapping[str, Mapping[str, Any]] = field(
        default_factory=dict, compare=False, hash=False
    )
    #: `crc32:XXXXXXXX` of the whole file, verified whenever it is read whole or cached
    #: locally. Empty = written before checksums (read unverified).
    checksum: str = field(default="", compare=False)
    #: For readers that fetch byte ranges: the checksum of the Parquet footer (the last
    #: `footer_length + 8` bytes) and of each row group's byte span, in row-group order.
    footer_checksum: str = field(default="", compare=False)
    row_group_checksums: tuple[str, ...] = field(default=(), compare=False)

    @property
    def group(self) -> str:
        return self.file_group or self.path

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "path": self.path,
            "size": self.size,
            "rows": self.rows,
            "partition": self.partition,
            "file_group": self.file_group,
        }
        if self.column_stats:
            out["column_stats"] = {k: dict(v) for k, v in self.column_stats.items()}
        if self.checksum:
            out["checksum"] = self.checksum
        if self.footer_checksum:
            out["footer_checksum"] = self.footer_checksum
        if self.row_group_checksums:
            out["row_group_checksums"] = list(self.row_group_checksums)
        return out

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> DataFile:
        return DataFile(
            path=str(d["path"]),
            size=int(d.get("size", 0)),
            rows=int(d.get("rows", 0)),
            partition=str(d.get("partition", "")),
            file_group=str(d.get("file_group", "")),
            column_stats=dict(d.get("column_stats", {})),
            checksum=str(d.get("checksum", "")),
            footer_checksum=str(d.get("footer_checksum", "")),
            row_group_checksums=tuple(str(c) for c in d.get("row_group_checksums", ())),
        )


@dataclass(frozen=True)
class Entry:
    """A completion in the commit log: instant, action, writer and its metadata.

    `seq` is its log position (completion order); -1 while it is only an intent.
    """

    seq: int
    time: str
    action: str
    writer: str
    metadata: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        validate_time(self.time)

    # -- typed views ----------------------------------------------------------------------------
    @property
    def is_write(self) -> bool:
        return self.action in WRITE_ACTIONS

    @property
    def is_commit(self) -> bool:
        return self.action in COMMIT_ACTIONS

    @property
    def added(self) -> tuple[DataFile, ...]:
        return tuple(DataFile.from_json(d) for d in self.metadata.get("added", ()))

    @property
    def replaced(self) -> tuple[DataFile, ...]:
        return tuple(DataFile.from_json(d) for d in self.metadata.get("replaced", ()))

    @property
    def replaced_partitions(self) -> frozenset[str]:
        return frozenset(self.metadata.get("replaced_partitions", ()))

    @property
    def deleted(self) -> tuple[str, ...]:
        return tuple(self.metadata.get("deleted", ()))

    @property
    def extra(self) -> dict[str, str]:
        return dict(self.metadata.get("extra", {}))

    @property
    def target(self) -> str:
        return str(self.metadata.get("target_time", ""))

    @property
    def rolled_back(self) -> tuple[str, ...]:
        """Completed instants this rollback/restore removed from the table."""
        return tuple(self.metadata.get("rolled_back", ()))

    @property
    def file_groups(self) -> frozenset[str]:
        return frozenset(f.group for f in (*self.added, *self.replaced))

    @property
    def partitions_written(self) -> frozenset[str]:
        return frozenset(f.partition for f in self.added)

    # -- bytes ------------------------------------------------------------------------------------
    def encode(self) -> bytes:
        body = {
            "format": FORMAT,
            "seq": self.seq,
            "instant_time": self.time,
            "action": self.action,
            "writer": self.writer,
            "metadata": self.metadata,
        }
        return seal_json(body)  # a crc32 field: the body checks itself wherever it is copied

    @staticmethod
    def decode(data: bytes, where: str = "") -> Entry:
        d = open_json(data, where)  # IntegrityError (naming `where`) before anything is used
        try:
            if d.get("format") != FORMAT:
                raise TimelineError(f"{where}: unsupported format {d.get('format')!r}")
            return Entry(
                int(d["seq"]),
                str(d["instant_time"]),
                str(d["action"]),
                str(d["writer"]),
                d.get("metadata", {}),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptTimelineObject(f"{where}: corrupt timeline object: {exc}", where) from exc

    def with_seq(self, seq: int) -> Entry:
        return Entry(seq, self.time, self.action, self.writer, self.metadata)


def write_metadata(
    operation: str,
    added: Iterable[DataFile],
    replaced: Iterable[DataFile] = (),
    replaced_partitions: Iterable[str] = (),
    extra: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "operation": operation,
        "added": [f.to_json() for f in added],
        "replaced": [
            {
                "path": f.path,
                "partition": f.partition,
                "file_group": f.file_group,
                "size": f.size,
                "rows": f.rows,
            }
            for f in replaced
        ],
        "replaced_partitions": sorted(set(replaced_partitions)),
        "extra": dict(extra or {}),
    }


def encode_plan(plan: Mapping[str, Any]) -> bytes:
    return seal_json({"format": FORMAT, **plan})


def decode_plan(data: bytes, where: str = "plan") -> dict[str, Any]:
    if not data:
        return {}
    return open_json(data, where)
