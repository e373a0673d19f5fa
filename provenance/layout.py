"""Object names under the provenance prefix. Names encode order, so nothing hot lists much.

ids/next-event-id                       the id allocator (compare-and-swap)
journals/<first:020d>-<end:020d>.arrow   one object per journal flush, ids [first, end)
journals/<end:020d>-<first:020d>.staged.json  a committed staged ingest (its parts' manifest)
journals/log-<first:020d>-<writer>.flog  local backend: a writer's log, a block per flush
staging/<ingest>/<n:06d>.arrow           parts of an ingest, visible once its manifest exists
table/...                               the timeline-managed table of merged files
    events/<first:020d>.parquet         merged events, sorted by event id
    index/<first:020d>.parquet          its term index (term, row group)
"""

from __future__ import annotations

from dataclasses import dataclass

JOURNALS = "journals/"
TABLE = "table"
EVENTS_PARTITION = "events"
INDEX_PARTITION = "index"
WIDTH = 20


@dataclass(frozen=True, order=True)
class JournalRef:
    """A flushed journal: event ids [first_id, end_id)."""

    first_id: int
    end_id: int
    key: str
    size: int = 0
    #: For a part of a staged ingest: the key of its manifest (see provenance/staging.py).
    group: str | None = None
    #: For a block of an append-only log (local backend): the log's key, and the offset of
    #: the block's header in it (`size` is then the payload's length). `key` stays unique.
    log: str | None = None
    offset: int = 0

    @property
    def count(self) -> int:
        return self.end_id - self.first_id


def journal_key(first_id: int, end_id: int) -> str:
    return f"{JOURNALS}{first_id:0{WIDTH}d}-{end_id:0{WIDTH}d}.arrow"


def parse_journal_key(key: str, size: int = 0) -> JournalRef | None:
    name = key.rsplit("/", 1)[-1]
    stem, _, ext = name.partition(".")
    first, _, end = stem.partition("-")
    if ext != "arrow" or not (first.isdigit() and end.isdigit()):
        return None
    return JournalRef(int(first), int(end), key, size)


LOG_PREFIX = f"{JOURNALS}log-"


def log_key(first_id: int, writer: str) -> str:
    """A new log, named by the first id it holds and its writer. The name starts with a letter,
    so `journals_after` never skips it (a log holds ids on both sides of the high-water mark)."""
    return f"{LOG_PREFIX}{first_id:0{WIDTH}d}-{writer}.flog"


def is_log_key(key: str) -> bool:
    return key.startswith(LOG_PREFIX) and key.endswith(".flog")


def block_ref(log: str, offset: int, length: int, first_id: int, end_id: int) -> JournalRef:
    return JournalRef(first_id, end_id, f"{log}@{offset}", length, log=log, offset=offset)


def journals_after(high_water: int) -> str | None:
    """`start_after` that skips every journal wholly below `high_water` (already merged)."""
    if high_water <= 0:
        return None
    # A journal starting at high_water-1 or lower sorts at or before this key.
    return f"{JOURNALS}{high_water - 1:0{WIDTH}d}-~"


def file_name(first_id: int) -> str:
    return f"{first_id:0{WIDTH}d}.parquet"
