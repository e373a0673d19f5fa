"""NiFi's `ProcessSession`: FlowFiles are created, changed, routed and removed inside a
session; `commit` makes content, claimant counts and provenance durable together and
`rollback` leaves nothing behind (see docs/provenance.md, "Sessions")."""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, BinaryIO

from storage import Finishing
from storage.content import (
    ContentRepository,
    ContentRepositoryError,
    ContentSession,
    ContentUnknownOutcome,
    ContentWriter,
)

from ..event import ProvenanceEvent, now_ms
from ..records import validate
from .errors import FlowFileHandlingError, SessionCommitError, SessionUnknownOutcome
from .events import Fork, Record, Reported, build_events, describe
from .flowfile import UUID, FlowFile, new_flowfile

if TYPE_CHECKING:
    from ..repository import ProvenanceRepository

Source = str | os.PathLike[str] | BinaryIO | bytes
WriteCallback = Callable[[ContentWriter], object]


@dataclass(frozen=True)
class CommitResult:
    """What a commit made durable: the event ids, and the FlowFiles per relationship."""

    event_ids: tuple[int, ...]
    events: tuple[ProvenanceEvent, ...]
    transferred: Mapping[str, tuple[FlowFile, ...]] = field(default_factory=dict)

    def flowfiles(self, relationship: str = "success") -> tuple[FlowFile, ...]:
        return tuple(self.transferred.get(relationship, ()))


class ProcessSession(Finishing):
    """One unit of work on FlowFiles. Not thread-safe (NiFi's sessions are not either).

    FlowFiles committed by an earlier session can be passed in: the first time the session
    sees one it becomes part of the session (NiFi's `get`). There are no queues, so a
    FlowFile need not be transferred: `transfer` records where it was routed (ROUTE) and
    groups the committed FlowFiles by relationship in the `CommitResult`.
    """

    def __init__(
        self,
        content: ContentRepository,
        provenance: ProvenanceRepository,
        component_id: str = "flowledger",
        component_type: str = "ProcessSession",
    ) -> None:
        self.content = content
        self.provenance = provenance
        self.component = (component_id, component_type)
        self._reset()

    def _reset(self) -> None:
        self._cs: ContentSession = self.content.session()
        self._records: dict[str, Record] = {}
        self._reported: list[Reported] = []
        self._forks: dict[str, Fork] = {}

    # -- bookkeeping ------------------------------------------------------------------------
    def _record(self, ff: FlowFile) -> Record:
        r = self._records.get(ff.uuid)
        if r is None:  # committed earlier: it joins this session unchanged
            r = self._records[ff.uuid] = Record(ff, ff)
        if r.removed:
            raise FlowFileHandlingError(f"FlowFile {ff.uuid} was removed in this session")
        if r.current != ff:
            raise FlowFileHandlingError(
                f"FlowFile {ff.uuid} is not the most recent version: use the FlowFile the "
                "last session call returned"
            )
        return r

    def _update(self, r: Record, ff: FlowFile) -> FlowFile:
        r.current = ff
        return ff

    def _new(self, ff: FlowFile, created: bool) -> FlowFile:
        if ff.uuid in self._records:
            raise FlowFileHandlingError(f"a FlowFile with uuid {ff.uuid} is already known")
        self._records[ff.uuid] = Record(None, ff, created=created)
        return ff

    # -- creating ---------------------------------------------------------------------------
    def create(
        self,
        parents: FlowFile | Sequence[FlowFile] | None = None,
        *,
        uuid: str | None = None,
        attributes: Mapping[str, str] | None = None,
    ) -> FlowFile:
        """A new FlowFile without content. With one parent it is a FORK child inheriting the
        parent's attributes; with several it is their JOIN, inheriting the attributes they
        all share. `uuid` lets a caller use a deterministic identity (e.g. uuid5 of a URI)."""
        if parents is None:
            return self._new(new_flowfile(uuid, attributes), created=True)
        ps = [parents] if isinstance(parents, FlowFile) else list(parents)
        if not ps:
            raise FlowFileHandlingError("create(parents): no parent FlowFiles given")
        recs = [self._record(p) for p in ps]
        inherited = dict(recs[0].current.attributes)
        for r in recs[1:]:
            inherited = {k: v for k, v in inherited.items() if r.current.attributes.get(k) == v}
        for core in (UUID, "filename"):
            inherited.pop(core, None)
        inherited.update(attributes or {})
        start = min(r.current.lineage_start_date for r in recs)
        child = self._new(new_flowfile(uuid, inherited, start), created=False)
        if len(recs) == 1:
            parent = recs[0].current.uuid
            self._forks.setdefault(parent, Fork(parent)).children.append(child.uuid)
        else:
            self._reported.append(
                Reported(
                    "JOIN",
                    child.uuid,
                    {
                        "parent_uuids": tuple(r.current.uuid for r in recs),
                        "child_uuids": (child.uuid,),
                    },
                )
            )
        return child

    def clone(self, ff: FlowFile) -> FlowFile:
        """A new FlowFile with the same attributes and content (bytes shared: one more
        claimant on the content claim)."""
        r = self._record(ff)
        if ff.content_claim is not None:
            self._cs.increment(ff.content_claim)
        attrs = {k: v for k, v in ff.attributes.items() if k not in (UUID, "filename")}
        child = new_flowfile(None, attrs, ff.lineage_start_date)
        child = self._new(child.evolve(content_claim=ff.content_claim), created=False)
        self._reported.append(
            Reported(
                "CLONE",
                r.current.uuid,
                {"parent_uuids": (ff.uuid,), "child_uuids": (child.uuid,)},
            )
        )
        return child

    # -- attributes -------------------------------------------------------------------------
    def put_attribute(self, ff: FlowFile, key: str, value: str) -> FlowFile:
        return self.put_all_attributes(ff, {key: value})

    def put_all_attributes(self, ff: FlowFile, attributes: Mapping[str, str]) -> FlowFile:
        r = self._record(ff)
        if UUID in attributes and attributes[UUID] != ff.uuid:
            raise FlowFileHandlingError("the uuid attribute of a FlowFile cannot be changed")
        attrs = dict(ff.attributes)
        attrs.update({str(k): str(v) for k, v in attributes.items()})
        return self._update(r, ff.evolve(attributes=attrs))

    def remove_attribute(self, ff: FlowFile, key: str) -> FlowFile:
        r = self._record(ff)
        if key == UUID:
            raise FlowFileHandlingError("the uuid attribute of a FlowFile cannot be removed")
        attrs = {k: v for k, v in ff.attributes.items() if k != key}
        return self._update(r, ff.evolve(attributes=attrs))

    # -- content ----------------------------------------------------------------------------
    def write(self, ff: FlowFile, data: bytes | WriteCallback) -> FlowFile:
        """Replace the content: `data` is the new bytes or a callback that writes them to the
        ContentWriter it is given. The old content loses this FlowFile as a claimant."""
        r = self._record(ff)
        with self._cs.write() as w:
            if isinstance(data, bytes | bytearray | memoryview):
                w.write(data)
            else:
                data(w)
        assert w.claim is not None
        if ff.content_claim is not None:
            self._cs.decrement(ff.content_claim)
        return self._update(r, ff.evolve(content_claim=w.claim))

    def import_from(self, source: Source, ff: FlowFile) -> FlowFile:
        """NiFi's `importFrom(path or stream, flowFile)`: the content becomes a copy of it."""

        def copy(w: ContentWriter) -> None:
            if isinstance(source, bytes):
                w.write(source)
            elif isinstance(source, str | os.PathLike):
                with open(source, "rb") as fh:
                    w.write_from(fh)
            else:
                w.write_from(source)

        return self.write(ff, copy)

    def read(self, ff: FlowFile) -> bytes:
        self._record(ff)
        return b"" if ff.content_claim is None else self.content.read_bytes(ff.content_claim)

    def open(self, ff: FlowFile) -> BinaryIO:
        """A verified stream of the content (large contents are not held in memory)."""
        self._record(ff)
        if ff.content_claim is None:
            return io.BytesIO(b"")
        return self.content.read(ff.content_claim)

    # -- routing ----------------------------------------------------------------------------
    def transfer(self, ff: FlowFile, relationship: str = "success") -> FlowFile:
        """Route the FlowFile to `relationship` (a ROUTE event at commit)."""
        if not relationship:
            raise FlowFileHandlingError("transfer: a relationship name is required")
        r = self._record(ff)
        r.relationship = relationship
        self._reported.append(Reported("ROUTE", ff.uuid, {"relationship": relationship}))
        return ff

    def remove(self, ff: FlowFile, details: str = "Removed by session") -> None:
        """Drop the FlowFile (DROP at commit; nothing at all if it was made in this session).
        Its content loses a claimant."""
        r = self._record(ff)
        if ff.content_claim is not None:
            self._cs.decrement(ff.content_claim)
        r.removed = True
        self._reported.append(Reported("DROP", ff.uuid, {"details": details}))

    # -- interactions with other systems ----------------------------------------------------
    def _io_event(
        self,
        event_type: str,
        ff: FlowFile,
        transit_uri: str,
        details: str | None,
        duration_ms: int,
        extra: Mapping[str, str | None] | None = None,
    ) -> None:
        if not transit_uri:
            raise FlowFileHandlingError(f"{event_type.lower()}: a transit URI is required")
        self._record(ff)
        fields: dict[str, object] = {
            "transit_uri": transit_uri,
            "details": details,
            "event_duration_ms": duration_ms,
        }
        fields.update(extra or {})
        self._reported.append(Reported(event_type, ff.uuid, fields))

    def receive(
        self,
        ff: FlowFile,
        transit_uri: str,
        source_system_flowfile_identifier: str | None = None,
        details: str | None = None,
        duration_ms: int = -1,
    ) -> None:
        """The FlowFile's data came from `transit_uri` (RECEIVE)."""
        extra = {"source_system_flowfile_identifier": source_system_flowfile_identifier}
        self._io_event("RECEIVE", ff, transit_uri, details, duration_ms, extra)

    def fetch(
        self, ff: FlowFile, transit_uri: str, details: str | None = None, duration_ms: int = -1
    ) -> None:
        """The content of an existing FlowFile was replaced from `transit_uri` (FETCH)."""
        self._io_event("FETCH", ff, transit_uri, details, duration_ms)

    def send(
        self, ff: FlowFile, transit_uri: str, details: str | None = None, duration_ms: int = -1
    ) -> None:
        """The FlowFile's data went to `transit_uri` (SEND). Its attributes and content are
        recorded as they are now, not as they are at commit (NiFi)."""
        if not transit_uri:
            raise FlowFileHandlingError("send: a transit URI is required")
        r = self._record(ff)
        event = describe(r, "SEND", self.component, now_ms())
        event = replace(
            event, transit_uri=transit_uri, details=details, event_duration_ms=duration_ms
        )
        self._reported.append(Reported("SEND", ff.uuid, frozen=event))

    # -- commit / rollback ------------------------------------------------------------------
    def pending_events(self) -> list[ProvenanceEvent]:
        """The events a commit would register now (for inspection and tests)."""
        return build_events(self._records, self._reported, self._forks.values(), self.component)

    def commit(self) -> CommitResult:
        """Make the session durable: content and claimant counts first, then provenance.

        Order (docs/provenance.md, "Sessions"): (1) build and validate the events, so a bad
        session fails before anything is written; (2) seal the content objects and write the
        claim-ledger batch: content and counts are durable; (3) write the events in one
        synchronous journal flush. A crash between (2) and (3) leaves counted content that no
        event names (a storage leak), never an event naming content that is not durable.
        """
        events = validate(self.pending_events())
        transferred: dict[str, list[FlowFile]] = {}
        for r in self._records.values():
            if r.relationship is not None and not r.removed:
                transferred.setdefault(r.relationship, []).append(r.current)
        try:
            self._cs.commit()
        except ContentUnknownOutcome:
            raise
        except ContentRepositoryError as exc:
            self.rollback()
            raise SessionCommitError(f"session commit failed, rolled back: {exc}") from exc
        try:
            ids = self.provenance.register_events(events, sync=True) if events else []
        except Exception as exc:
            self._reset()
            raise SessionUnknownOutcome(
                f"session commit: content is durable but the provenance journal write failed "
                f"({exc}); the journal is retried at the next flush"
            ) from exc
        self._reset()
        stamped = tuple(e.with_id(i) for e, i in zip(events, ids, strict=False))
        return CommitResult(
            tuple(ids), stamped or tuple(events), {k: tuple(v) for k, v in transferred.items()}
        )

    def rollback(self) -> None:
        """Forget everything: no event, no claimant change; contents written are deleted."""
        self._cs.rollback()
        self._reset()

    def exit_failed(self) -> None:
        self.rollback()

    def exit_ok(self) -> None:
        try:
            self.commit()
        except (FlowFileHandlingError, ValueError):
            self.rollback()  # refused before anything was written: leave nothing behind
            raise
