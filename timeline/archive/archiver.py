"""The archiver: moves old completed instants from the active timeline into an archive file.

One run (plan first, every step recoverable; see docs/archival.md):

  1. load the active timeline (manifest-aware) and choose instants (planner.py)
  2. PUT the run's plan                                    create-only
  3. claim the manifest (pending = the plan)               CAS; loses to a concurrent run
  4. PUT the archive file `<min>_<max>_<nonce>.avro`       create-only
  5. PUT the new state checkpoint (old + archived entries)  create-only
  6. commit: manifest lists the file, the archived seqs    CAS: the commit point
  7. delete requested/inflight states and heartbeats, then completed states one by one,
     oldest first (a reader never sees a hole); clear pending; delete the plan

The commit log `_timeline/log/<seq>` is never deleted: it is the create-only serialization
point, and deleting a position would let a stale writer re-create it.
"""

from __future__ import annotations

import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from storage import NotFound, ObjectStore, ProgressCallback, checksum_of, report_progress

from .. import crash
from ..instant import (
    COMMIT,
    COMPACT_OPERATION,
    DELTA_COMMIT,
    PLANNED_AS,
    RESTORE,
    ROLLBACK,
    SAVEPOINT,
    SEQ_WIDTH,
    WRITE_ACTIONS,
    Instant,
    State,
    parse_name,
    pending_actions,
)
from ..layout import heartbeat_key, instant_key, instant_prefix, log_key
from ..settings import ArchivalSettings
from ..store import TimelineStore
from .errors import ArchiveConflict
from .format import FORMAT, ArchivedInstant, decode_archive, encode_archive, encode_json
from .layout import ARCHIVE, CHECKPOINTS, archive_file_key, checkpoint_key, plan_key
from .manifest import (
    ARCHIVE_RUN,
    MERGE_RUN,
    ArchiveFile,
    Manifest,
    Pending,
    add_ranges,
    read_manifest,
    swap,
)
from .merge import merge_files, recover_merge
from .planner import ArchivePlan, plan_archival
from .view import cleaner_state, encode_checkpoint, load_active, read_checkpoint

if TYPE_CHECKING:
    from ..table import Table


@dataclass(frozen=True)
class ArchiveResult:
    archived: tuple[Instant, ...] = ()
    file: str = ""
    merged: str = ""
    recovered: tuple[str, ...] = ()
    limit_reason: str = ""


class Archiver:
    """Archives a table's timeline. Safe to run from several processes at once."""

    def __init__(
        self,
        table: Table | TimelineStore,
        settings: ArchivalSettings | None = None,
        writer_id: str | None = None,
    ) -> None:
        if isinstance(table, TimelineStore):
            self.tl = table
            self.writer = writer_id or uuid.uuid4().hex[:12]
        else:
            self.tl = table.tl
            self.writer = writer_id or table.settings.writer_id
        self.store: ObjectStore = self.tl.store
        self.settings = settings or ArchivalSettings()

    # -- public -----------------------------------------------------------------------------
    def run(
        self,
        merge: bool | None = None,
        sweep: bool = False,
        progress: ProgressCallback | None = None,
    ) -> ArchiveResult:
        """Recover an interrupted run, archive what the rules allow, then merge small files
        (if `merge`, default the `archive_merge_enable` setting); `sweep` also removes
        leftovers of crashed runs (one LIST of the archive folder). `progress` counts two
        steps per archived instant: its objects read, then removed from the active timeline."""
        m = read_manifest(self.store)
        recovered = tuple(self._recover(m) + (self.sweep() if sweep else []))
        if recovered:  # the manifest changed: read it again (not otherwise: one GET per run)
            m = read_manifest(self.store)
        plan, file = self._archive(m, progress)
        merged = ""
        if merge if merge is not None else self.settings.archive_merge_enable:
            merged = (
                merge_files(self.store, read_manifest(self.store), self.settings, self.writer) or ""
            )
        return ArchiveResult(
            plan.instants if file else (), file, merged, recovered, plan.limit_reason
        )

    def plan(self) -> ArchivePlan:
        """What a run would archive now (nothing is written)."""
        m = read_manifest(self.store)
        view = load_active(self.tl, m)
        p = plan_archival(
            view.timeline, self.tl.entry_of, cleaner_state(self.tl, view), self.settings
        )
        return replace(p, instants=tuple(i for i in p.instants if not m.is_archived(i.seq)))

    def recover(self) -> list[str]:
        """Finish or discard a run interrupted by a crash. ArchiveConflict while another
        archiver's uncommitted claim is within its lease."""
        return self._recover(read_manifest(self.store))

    def _recover(self, m: Manifest) -> list[str]:
        p = m.pending
        if p is None:
            return []
        if p.kind == MERGE_RUN:
            return [recover_merge(self.store, m, self.settings)]
        if p.committed:
            self._finish(m)
            return [f"finished archival run {self.store.url(p.target)}"]
        if not p.lease_expired(self.settings.archive_lease_ms):
            raise ArchiveConflict(
                f"an archival run claimed by {p.writer} is running ({p.plan_key})"
            )
        nonce = p.plan_key.rsplit("-", 1)[-1].removesuffix(".plan")
        swap(self.store, m, m.evolve(pending=None))  # first: proves the claim is current
        self.store.delete(p.target)
        self.store.delete(checkpoint_key(nonce))
        self.store.delete(p.plan_key)
        return [f"discarded uncommitted archival run {self.store.url(p.target)}"]

    def sweep(self) -> list[str]:
        """Delete archive-folder objects no manifest state references (left by a crash
        between writing a plan and claiming the manifest, or by a discarded run), once they
        are older than the lease. A LIST: run by `timeline archive`, not after commits."""
        m = read_manifest(self.store)
        keep = {f.key for f in m.files} | {m.checkpoint}
        if m.pending is not None:
            keep |= {m.pending.plan_key, m.pending.target, m.pending.old_checkpoint}
            nonce = m.pending.plan_key.rsplit("-", 1)[-1].removesuffix(".plan")
            keep.add(checkpoint_key(nonce))
        cutoff = time.time() - self.settings.archive_lease_ms / 1000.0
        gone = [
            o.key
            for prefix in (ARCHIVE, CHECKPOINTS)
            for o in self.store.list(prefix)
            if o.key not in keep
            and (o.last_modified is None or o.last_modified.timestamp() <= cutoff)
        ]
        self.store.delete_many(gone)
        return [f"removed leftover {self.store.url(k)}" for k in gone]

    # -- one run ----------------------------------------------------------------------------
    def _archive(
        self, m: Manifest, progress: ProgressCallback | None = None
    ) -> tuple[ArchivePlan, str]:
        if m.pending is not None:  # claimed by another archiver since recover() looked
            raise ArchiveConflict(
                f"archival run {m.pending.plan_key} of {m.pending.writer} is running"
            )
        view = load_active(self.tl, m)
        if view.superseded:  # pending states of archived completions (e.g. an older
            # archiver left a compaction's plan objects beside its commit): garbage
            for i in view.superseded:
                self.tl.states.delete_pending(i)
        plan = plan_archival(
            view.timeline, self.tl.entry_of, cleaner_state(self.tl, view), self.settings
        )
        todo = [i for i in plan.instants if not m.is_archived(i.seq)]
        if not todo:
            return plan, ""
        report_progress(progress, 0, 2 * len(todo))
        records = self._collect(todo, progress)
        nonce = uuid.uuid4().hex[:16]
        target = archive_file_key(todo[0].time, max(i.time for i in todo), nonce)
        pkey = plan_key(ARCHIVE_RUN, nonce)
        body = {
            "format": FORMAT,
            "kind": ARCHIVE_RUN,
            "writer": self.writer,
            "target": target,
            "instants": [i.name for i in todo],
        }
        self.store.put_if_absent(pkey, encode_json(body))
        crash.point("archive.planned")
        pending = Pending(
            ARCHIVE_RUN, pkey, target, self.writer, time.time(), old_checkpoint=m.checkpoint
        )
        try:
            m1 = swap(self.store, m, m.evolve(pending=pending))
        except ArchiveConflict:
            self.store.delete(pkey)
            raise
        crash.point("archive.claimed")
        data = encode_archive(records, self.settings.archival_batch_size)
        self.store.put_if_absent(target, data)
        crash.point("archive.written")
        old, _ = read_checkpoint(self.store, m1)
        ckey = checkpoint_key(nonce)
        where = self.store.url(target)
        self.store.put_if_absent(
            ckey, encode_checkpoint([*old, *(r.entry(where) for r in records)])
        )
        last_commit = max((i.time for i in todo if i.action in WRITE_ACTIONS), default="")
        new = m1.evolve(
            files=tuple(
                sorted(
                    [
                        *m1.files,
                        ArchiveFile(
                            target,
                            todo[0].time,
                            records_max(records),
                            len(records),
                            len(data),
                            checksum_of(data),
                        ),
                    ],
                    key=lambda f: (f.min_time, f.key),
                )
            ),
            archived_seqs=add_ranges(m1.archived_seqs, _accounted(records, where)),
            last_archived_time=max(m1.last_archived_time, last_commit),
            checkpoint=ckey,
            pending=replace(pending, committed=True),
        )
        try:
            m2 = swap(self.store, m1, new)
        except ArchiveConflict:
            self.store.delete(target)  # our claim was discarded after its lease: undo
            self.store.delete(ckey)
            raise
        crash.point("archive.committed")
        self._finish(m2, records, progress)  # no archive read: the commit path may run this
        return plan, target

    def _collect(
        self, instants: list[Instant], progress: ProgressCallback | None = None
    ) -> list[ArchivedInstant]:
        """The completed body (the commit metadata) and plan body of each instant."""

        def one(i: Instant) -> ArchivedInstant:
            try:
                meta = self.store.get(instant_key(i))
            except NotFound:  # completed in the log, object not materialized yet
                meta = self.store.get(log_key(i.seq or 0))
            e = ArchivedInstant(i.time, i.action, "completed", i.seq, "", meta).entry()
            plan = None
            planned = _plan_state(i, e.metadata.get("operation"))
            if planned is not None:
                try:
                    plan = self.store.get(instant_key(planned))
                except NotFound:
                    plan = None
            return ArchivedInstant(
                i.time, i.action, State.COMPLETED.value, i.seq, e.writer, meta, plan
            )

        out = []
        with ThreadPoolExecutor(
            self.settings.archive_read_parallelism, "flowledger-archiver-read"
        ) as pool:
            for record in pool.map(one, instants):  # reported from the caller's thread
                out.append(record)
                report_progress(progress, 1)
        return out

    def _archived_by(self, m: Manifest) -> list[ArchivedInstant]:
        p = m.pending
        assert p is not None
        try:
            listed = next((f for f in m.files if f.key == p.target), None)
            data = listed.read(self.store) if listed else self.store.get(p.target)
        except NotFound as exc:  # finished (and merged away) by another archiver meanwhile
            if read_manifest(self.store).etag != m.etag:
                raise ArchiveConflict(f"archival run {p.plan_key} was finished by another") from exc
            raise
        return decode_archive(data, self.store.url(p.target), with_bodies=False)

    def _finish(
        self,
        m: Manifest,
        records: list[ArchivedInstant] | None = None,
        progress: ProgressCallback | None = None,
    ) -> None:
        """Delete the archived instants' objects (pending states first, then completed ones
        oldest first), the old checkpoint, then clear pending. Idempotent."""
        p = m.pending
        assert p is not None and p.committed
        if records is None:  # recovery: the committed file says what was archived
            records = self._archived_by(m)
        records = sorted(records, key=lambda r: (r.time, r.action))
        # Keys built from the (validated when archived) records: no re-parsing per instant.
        # A commit's may include a compaction plan's states (`<t>.compaction.*`): left
        # behind, they would make the archived compaction pending again.
        pending_keys = [
            f"{instant_prefix(r.time)}{action}.{s}"
            for r in records
            for action in pending_actions(r.action)
            for s in (State.INFLIGHT.value, State.REQUESTED.value)
        ]
        self.store.delete_many(pending_keys)
        self.store.delete_many([heartbeat_key(r.time) for r in records])
        crash.point("archive.pending_deleted")
        done = [
            f"{instant_prefix(r.time)}{r.action}.completed.{r.seq:0{SEQ_WIDTH}d}" for r in records
        ]
        step = self.settings.archive_completed_delete_batch
        for n in range(0, len(done), step):  # oldest first: never a hole for a reader
            if step == 1:
                self.store.delete(done[n])
            else:  # one request per chunk; safe for manifest-aware readers (docs/archival.md)
                self.store.delete_many(done[n : n + step])
            report_progress(progress, len(done[n : n + step]))
            if n == 0:
                crash.point("archive.completed_deleted")
        if p.old_checkpoint and p.old_checkpoint != m.checkpoint:
            self.store.delete(p.old_checkpoint)
        swap(self.store, m, m.evolve(pending=None))
        self.store.delete(p.plan_key)
        crash.point("archive.done")


def _plan_state(i: Instant, operation: object) -> Instant | None:
    """The state object holding an instant's plan, archived with it: the requested object
    (inflight for a savepoint); a compaction's is `<t>.compaction.requested`; a plain
    commit's or delta commit's holds no plan."""
    if i.action == SAVEPOINT:
        return Instant(i.time, i.action, State.INFLIGHT)
    if i.action == COMMIT and operation == COMPACT_OPERATION:
        return Instant(i.time, PLANNED_AS[COMMIT], State.REQUESTED)
    if i.action in (COMMIT, DELTA_COMMIT):
        return None
    return Instant(i.time, i.action, State.REQUESTED)


def _accounted(records: list[ArchivedInstant], where: str) -> list[int]:
    """Log positions the archive now accounts for: the archived instants', and those of the
    commits an archived rollback/restore undid (their completed objects are gone, and only
    the rollback's object said so; without this a loader would take them for completions)."""
    out = [r.seq for r in records if r.seq is not None]
    for r in records:
        if r.action in (ROLLBACK, RESTORE):
            out += [parse_name(n).seq or 0 for n in r.entry(where).rolled_back]
    return [s for s in out if s > 0]


def records_max(records: list[ArchivedInstant]) -> str:
    return max(r.time for r in records)
