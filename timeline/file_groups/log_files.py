"""Log blocks as their delta commits record them: the value type a file slice holds, and
reading it out of commit metadata. Writing and decoding the blocks themselves is keyed
tables' business (`timeline/keyed/logfile.py`); the file-group view only needs what a
commit says about them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

LOG_FILES = "log_files"  # the commit-metadata field listing a delta commit's log files
#: The write-stats fields a log file's record carries for the index (keyed/index/ranges.py reads
#: them as
#: it reads a base file's).
KEY_STATS = (
    "min_key",
    "max_key",
    "key_min",
    "key_max",
    "bloom",
    "bloom_path",
    "bloom_checksum",
    "bloom_num_bits",
    "bloom_num_hashes",
    "bloom_hash",
    "base",
    "beyond_base",
)


@dataclass(frozen=True)
class LogFile:
    """One log file as its delta commit records it."""

    path: str
    file_group: str
    partition: str
    instant: str
    block: int
    size: int
    rows: int
    checksum: str
    upserts: int = 0
    deletes: int = 0
    #: The ordering column a reader compares this block's entries by (the event_time merge
    #: mode, applied at read time); "" (format 1/2 blocks, commit_time tables): its entries
    #: were decided when written, or the latest simply wins, so they apply in order.
    merge_by: str = ""
    #: Whether its deletes are compared by `merge_by` too; False: a delete without an
    #: ordering value, which wins whatever the stored record's.
    ordered_deletes: bool = False
    #: What the index consults for this log's keys (key range, bloom filter: the fields of
    #: a base file's write stats), so a key inserted into a log is found again.
    key_stats: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)
    #: Where the block starts in a log object holding the blocks of several file groups
    #: (keyed/log/objects.py); None: the object is this block alone (one object per file group).
    #: `size` and `checksum` are then the block's, `object_size` and `object_checksum` the
    #: whole object's (verified when a reader fetches it whole).
    offset: int | None = None
    object_size: int = 0
    object_checksum: str = ""
    #: The length of the object's stream head (its schema message) when the object is one
    #: Arrow IPC stream whose record batches are its blocks (log format 4,
    #: keyed/log/stream.py); `checksum` then covers the head's bytes followed by the
    #: block's. 0: a block sealed on its own (formats 1-3).
    head: int = 0

    @property
    def block_id(self) -> tuple[str, str, int]:
        """What names a block: a task retried under another file name writes the same id,
        and readers keep one block per id."""
        return (self.instant, self.file_group, self.block)

    @property
    def ref(self) -> str:
        """What names this block among a table's logs (compaction plans, the index): its
        object's path, with its offset when the object holds several blocks."""
        return self.path if self.offset is None else f"{self.path}#{self.offset}"

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "file_group": self.file_group,
            "partition": self.partition,
            "instant": self.instant,
            "block": self.block,
            "size": self.size,
            "rows": self.rows,
            "checksum": self.checksum,
            "upserts": self.upserts,
            "deletes": self.deletes,
            **({"merge_by": self.merge_by} if self.merge_by else {}),
            **({"ordered_deletes": True} if self.ordered_deletes else {}),
            **self.key_stats,
            **(
                {
                    "offset": self.offset,
                    "object_size": self.object_size,
                    "object_checksum": self.object_checksum,
                }
                if self.offset is not None
                else {}
            ),
            **({"head": self.head} if self.head else {}),
        }

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> LogFile:
        return LogFile(
            str(d["path"]),
            str(d["file_group"]),
            str(d.get("partition", "")),
            str(d["instant"]),
            int(d.get("block", 0)),
            int(d.get("size", 0)),
            int(d.get("rows", 0)),
            str(d.get("checksum", "")),
            int(d.get("upserts", 0)),
            int(d.get("deletes", 0)),
            str(d.get("merge_by", "")),
            bool(d.get("ordered_deletes", False)),
            {k: d[k] for k in KEY_STATS if k in d},
            int(d["offset"]) if d.get("offset") is not None else None,
            int(d.get("object_size", 0)),
            str(d.get("object_checksum", "")),
            int(d.get("head", 0)),
        )


def log_ref(d: Mapping[str, Any]) -> str:
    """`LogFile.ref` of a log as its commit metadata records it."""
    off = d.get("offset")
    return str(d["path"]) if off is None else f"{d['path']}#{int(off)}"


def ref_path(ref: str) -> str:
    """The object path of a `LogFile.ref` (a log name never ends in `#<digits>`)."""
    head, sep, tail = ref.rpartition("#")
    return head if sep and tail.isdigit() else ref


def logs_of(metadata: Mapping[str, Any]) -> list[LogFile]:
    """A commit's log files, one per block id (a block recorded twice is read once)."""
    seen: set[tuple[str, str, int]] = set()
    out = []
    for d in metadata.get(LOG_FILES, ()):
        lf = LogFile.from_json(d)
        if lf.block_id not in seen:
            seen.add(lf.block_id)
            out.append(lf)
    return out


def log_objects_of(metadata: Mapping[str, Any]) -> list[str]:
    """The log objects a commit wrote, each once (an object may hold several blocks)."""
    return list(dict.fromkeys(lf.path for lf in logs_of(metadata)))
