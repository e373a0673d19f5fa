"""Staged journals: a large ingest becomes visible all at once, with bounded memory.

A journal flush is visible as soon as its PUT returns, so writing a big file as many journals
would expose a prefix of it if the writer died half-way. An ingest therefore:

1. writes its events, without ids, as parts of `journal_max_events` events under
   `staging/<ingest id>/<n>.arrow` (invisible: readers and rollover never list `staging/`);
2. takes ids for all of them with one compare-and-swap on the allocator;
3. writes one create-only manifest `journals/<end>-<first>.staged.json` listing the parts.

Step 3 is the commit point: readers and rollover expand the manifest into one journal per
part (ids assigned on read: part i holds ids [first + offset_i, ...)), so every event of the
ingest appears in the same instant, or none. The manifest is named by its *end* id so that the
`start_after=<high-water>` listing still finds it after a rollover merged its first parts.
Parts of an ingest that died before step 3 are deleted by recovery once the newest is older
than `staging_timeout_s`. A death between steps 2 and 3 leaves a hole of ids, skipped by
rollover after `journal_gap_timeout_s` exactly like a writer dying mid-flush.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
from cachetools import FIFOCache

from storage import (
    Conflict,
    EndpointUnreachable,
    NotFound,
    ObjectStore,
    StorageError,
    UnknownOutcome,
    open_json,
    seal_json,
)

from . import crash
from .errors import ProvenanceConflict, ProvenanceError, ProvenanceUnknownOutcome
from .ids import IdAllocator
from .journal_logs import read_block
from .layout import JOURNALS, WIDTH, JournalRef
from .parquet_io import decode_journal, encode_journal
from .schema import assign_ids

STAGING = "staging/"
MANIFEST_SUFFIX = ".staged.json"


def manifest_key(first_id: int, end_id: int) -> str:
    return f"{JOURNALS}{end_id:0{WIDTH}d}-{first_id:0{WIDTH}d}{MANIFEST_SUFFIX}"


def parse_manifest_key(key: str) -> tuple[int, int] | None:
    """(first, end) of a manifest key, else None."""
    name = key.rsplit("/", 1)[-1]
    if not name.endswith(MANIFEST_SUFFIX):
        return None
    end, _, first = name.removesuffix(MANIFEST_SUFFIX).partition("-")
    if not (first.isdigit() and end.isdigit()):
        return None
    return int(first), int(end)


class Manifests:
    """Committed manifests' parts, each manifest read once: manifests are immutable
    (create-only, named by their unique ids). The oldest are dropped past `capacity`. Owned
    by a repository; a caller without one reads the manifest each time."""

    def __init__(self, capacity: int = 1024) -> None:
        self._parts: FIFOCache[tuple[str, str], list[JournalRef]] = FIFOCache(capacity)
        self._lock = threading.Lock()

    def get(self, store: ObjectStore, key: str) -> list[JournalRef] | None:
        with self._lock:
            return self._parts.get((store.uri, key))

    def put(self, store: ObjectStore, key: str, parts: list[JournalRef]) -> None:
        with self._lock:
            self._parts[(store.uri, key)] = parts


def expand(store: ObjectStore, key: str, manifests: Manifests | None = None) -> list[JournalRef]:
    """The parts of a committed manifest, as journals (one GET, then cached in `manifests`)."""
    parts = None if manifests is None else manifests.get(store, key)
    if parts is None:
        doc = open_json(store.get(key), store.url(key))
        parts = _remember(store, key, doc, manifests)
    return list(parts)


def _remember(
    store: ObjectStore, key: str, doc: dict[str, Any], manifests: Manifests | None
) -> list[JournalRef]:
    """The manifest `doc` (stored at `key`) as journals, cached for `expand`."""
    parts, first = [], int(doc["first_id"])
    for part in doc["parts"]:
        rows = int(part["rows"])
        parts.append(JournalRef(first, first + rows, str(part["key"]), int(part["size"]), key))
        first += rows
    if manifests is not None:
        manifests.put(store, key, parts)
    return parts


def load(store: ObjectStore, ref: JournalRef) -> pa.Table:
    """A journal's events; a staged part gets its ids here (they were taken at commit)."""
    if ref.log is not None:
        where = f"{store.url(ref.log)} (block at offset {ref.offset})"
        table = decode_journal(read_block(store, ref), where, ref.count)
        return table
    table = decode_journal(store.get(ref.key), store.url(ref.key), ref.count)
    return assign_ids(table, ref.first_id) if ref.group else table


def is_last_part(ref: JournalRef) -> bool:
    span = parse_manifest_key(ref.group) if ref.group else None
    return span is not None and span[1] == ref.end_id


def delete_group(
    store: ObjectStore, key: str, below: int | None = None, manifests: Manifests | None = None
) -> int:
    """Delete a manifest's parts (only those below `below`, if given) and, when every part
    goes, the manifest itself (after its parts, so a crash leaves no orphan manifest)."""
    try:
        parts = expand(store, key, manifests)
    except NotFound:
        return 0
    doomed = [p.key for p in parts if below is None or p.end_id <= below]
    store.delete_many(doomed)
    if len(doomed) == len(parts):
        store.delete_many([key])
    return len(doomed)


@dataclass(frozen=True)
class Committed:
    first_id: int
    end_id: int
    parts: tuple[JournalRef, ...]


class StagedIngest:
    """Stage parts, then commit them in one manifest (see the module docstring).

    `abort` deletes the staged parts only while it knows that no manifest names them: before
    the manifest PUT, or after a failure that proves it did not land. Once the PUT may have
    landed (sent and unanswered, interrupted, unreadable) the parts stay; recovery deletes
    them later only if no manifest it lists names them."""

    def __init__(
        self, store: ObjectStore, compression: str, manifests: Manifests | None = None
    ) -> None:
        self._store = store
        self._compression = compression
        self._manifests = manifests
        self.ingest_id = uuid.uuid4().hex
        self._parts: list[tuple[str, int, int]] = []  # (key, rows, bytes)
        #: staging -> sending -> committed; or not-committed (it proved not to land) or
        #: unknown (it may have landed).
        self.state = "staging"

    def stage(self, table: pa.Table) -> None:
        key = f"{STAGING}{self.ingest_id}/{len(self._parts):06d}.arrow"
        data = encode_journal(table, self._compression)
        self._store.put_if_absent(key, data)
        self._parts.append((key, table.num_rows, len(data)))

    def commit(self, allocator: IdAllocator) -> Committed:
        rows = sum(p[1] for p in self._parts)
        if rows == 0:
            return Committed(-1, -1, ())
        crash.point("provenance.ingest.parts_staged")
        try:
            first = allocator.allocate(rows)
        except ProvenanceUnknownOutcome as exc:
            # Ids may be taken (a hole rollover skips), but no manifest was sent: the
            # ingest did not commit, which is known, so not "unknown".
            raise ProvenanceError(
                f"the ingest of {rows} events did not commit (nothing is visible; ingesting "
                f"again is safe): {exc}"
            ) from exc
        doc = {
            "ingest": self.ingest_id,
            "first_id": first,
            "end_id": first + rows,
            "created": datetime.now(UTC).isoformat(),
            "parts": [{"key": k, "rows": n, "size": s} for k, n, s in self._parts],
        }
        key, body = manifest_key(first, first + rows), seal_json(doc)
        what = f"committing the ingest of {rows} events (ids {first}..{first + rows - 1})"
        self.state = "sending"
        try:
            self._store.put_if_absent(key, body)
        except Conflict as exc:
            # Our ids are ours alone and the store read back what a retried request left:
            # another manifest is there, ours never lands, no manifest names our parts.
            self.state = "not-committed"
            raise ProvenanceConflict(
                f"{what}: {self._store.url(key)} exists with other contents"
            ) from exc
        except EndpointUnreachable:
            self.state = "not-committed"  # the store sent nothing (else: UnknownOutcome)
            raise
        except StorageError as exc:
            self.state = self._look(key, body, exc)
            if self.state == "not-committed":
                raise
            if self.state == "unknown":
                raise ProvenanceUnknownOutcome(
                    f"{what}: {exc}; they are all visible or none is: check with "
                    f"`provenance events --first {first}` once the store answers, before "
                    "ingesting the file again"
                ) from exc
        self.state = "committed"
        crash.point("provenance.ingest.committed")
        # Known without reading it back: a failed read here must not turn a committed
        # ingest into a failed one (whose cleanup would then delete committed parts).
        return Committed(
            first, first + rows, tuple(_remember(self._store, key, doc, self._manifests))
        )

    def _look(self, key: str, body: bytes, failure: StorageError) -> str:
        """After a failed manifest PUT: read it back once. committed (our bytes are there),
        not-committed (another's; or absent after an answer that says it was not applied),
        or unknown (unreadable, or absent after an unanswered request: it could still
        land late)."""
        try:
            found = self._store.get(key)
        except NotFound:
            return "unknown" if isinstance(failure, UnknownOutcome) else "not-committed"
        except StorageError:
            return "unknown"
        return "committed" if found == body else "not-committed"

    def abort(self) -> None:
        """Best effort: recovery deletes what is left after `staging_timeout_s`. Deletes
        nothing once the manifest may have landed (see the class docstring)."""
        if self.state not in ("staging", "not-committed"):
            return
        with contextlib.suppress(Exception):  # cleanup must not hide the original error
            self._store.delete_many([k for k, _, _ in self._parts])


def clean_staging(
    store: ObjectStore, live: Iterable[str], timeout_s: float, now: datetime | None = None
) -> int:
    """Delete parts of ingests that never committed (no live manifest names them) once the
    newest part of the ingest is older than `timeout_s` (it may still be staging until then)."""
    now = now or datetime.now(UTC)
    keep = set(live)
    by_ingest: dict[str, list[tuple[str, datetime | None]]] = {}
    for info in store.list(STAGING):
        ingest = info.key.removeprefix(STAGING).split("/", 1)[0]
        by_ingest.setdefault(ingest, []).append((info.key, info.last_modified))
    doomed: list[str] = []
    for ingest, objs in by_ingest.items():
        if ingest in keep:
            continue
        newest = max((t for _, t in objs if t is not None), default=None)
        if newest is None or (now - newest).total_seconds() >= timeout_s:
            doomed += [k for k, _ in objs]
    store.delete_many(doomed)
    return len(doomed)


def ingest_of(ref: JournalRef) -> str | None:
    """The ingest id of a staged part (None for an ordinary journal)."""
    if not ref.group:
        return None
    return ref.key.removeprefix(STAGING).split("/", 1)[0]


def register_staged(
    store: ObjectStore,
    compression: str,
    manifests: Manifests,
    allocator: IdAllocator,
    tables: Iterable[pa.Table],
    conform: Callable[[pa.Table], pa.Table],
) -> Committed:
    """Stage each non-empty table (validated by `conform`) as one invisible part, then
    commit them all in one manifest; a failure aborts the whole ingest (see `abort`)."""
    staged = StagedIngest(store, compression, manifests)
    try:
        for table in tables:
            if table.num_rows:
                staged.stage(conform(table))
        done = staged.commit(allocator)
    except BaseException:
        staged.abort()  # deletes nothing once the manifest may have landed
        raise
    if done.parts:
        allocator.landed(done.first_id, done.end_id)
    return done
