"""Archive, destruction and the orphan sweep: how unreferenced resource claims go away.

* **Archive** is a state, not a copy: a registered claim whose durable claimant count is 0
  is archived from the ledger batch that brought it to 0 (its `changed` time).
* **Destruction** is planned first: a ledger batch lists the claims to destroy, then their
  objects are deleted. A crash in between leaves destroyed-but-present objects, which the
  next sweep deletes again (deleting is idempotent).
* **Orphans** are objects no durable ledger entry registers, older than the grace period:
  their writer died before its session commit. They are archived (registered with count 0),
  so they leave after the archive retention like any unreferenced content.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from typing import TYPE_CHECKING

from ..errors import StorageError
from .errors import translate
from .ledger import LedgerBatch

if TYPE_CHECKING:
    from .state import ContentState

log = logging.getLogger("storage.content")


def _delete(state: ContentState, refs: list[str]) -> None:
    by_container: dict[str, list[str]] = defaultdict(list)
    for ref in refs:
        name, _, key = ref.partition("/")
        if name in state.containers.by_name:
            by_container[name].append(key)
    for name, keys in by_container.items():
        store = state.containers.by_name[name].store
        try:
            store.delete_many(keys)
        except StorageError as exc:
            raise translate(exc, f"delete {len(keys)} resource claims in {name}") from exc


def destroy(state: ContentState, refs: list[str]) -> int:
    """Record the destruction in the ledger (the plan), then delete the objects."""
    if not refs:
        return 0
    with state.cleanup_lock:
        state.ledger.append(LedgerBatch(time.time(), destroy=tuple(refs)))
        _delete(state, refs)
    log.info("content repository: destroyed %d resource claims", len(refs))
    return len(refs)


def sweep_orphans(state: ContentState) -> int:
    """Archive objects nobody references; delete again what was destroyed but is present."""
    s = state.settings
    with state.cleanup_lock:
        claims = state.refresh()
        now = time.time()
        orphans: dict[str, tuple[int, float]] = {}
        again: list[str] = []
        for c in state.containers.order:
            try:
                listing = list(c.store.list())
            except StorageError as exc:
                raise translate(exc, f"list container {c.name}") from exc
            for obj in listing:
                if obj.key.count("/") != 1:
                    continue  # not a resource claim (section/identifier)
                ref = f"{c.name}/{obj.key}"
                rec = claims.get(ref)
                if rec is not None and rec.destroyed:
                    again.append(ref)
                    continue
                if (rec is not None and rec.registered) or state.local.holds(ref):
                    continue
                modified = obj.last_modified.timestamp() if obj.last_modified else 0.0
                if now - modified >= s.orphan_grace_period:
                    orphans[ref] = (obj.size, now)
        if orphans:
            if s.archive_enabled:
                state.ledger.append(LedgerBatch(now, register=orphans))
            else:
                _delete(state, list(orphans))
            log.warning(
                "content repository: %d unreferenced resource claims found (writers that "
                "crashed before committing); %s",
                len(orphans),
                "archived" if s.archive_enabled else "deleted",
            )
        _delete(state, again)
    return len(orphans)


def abort_stale_uploads(state: ContentState, older_than: float | None) -> int:
    """What writers killed mid-upload left: incomplete multipart uploads, local temp files."""
    done = 0
    with state.cleanup_lock:
        for c in state.containers.order:
            try:
                done += c.store.abort_stale_uploads(older_than)
            except StorageError as exc:
                raise translate(exc, f"abort stale uploads in container {c.name}") from exc
    if done:
        log.warning("content repository: removed %d uploads of writers that died", done)
    return done


def expire_archive(state: ContentState) -> int:
    """Destroy archived claims past `archive_max_retention`, then oldest first while a
    container is over `archive_max_usage_percentage` of `max_bytes`."""
    s = state.settings
    with state.cleanup_lock:
        claims = state.refresh()
        now = time.time()
        doomed: list[str] = []
        for c in state.containers.order:
            prefix = c.name + "/"
            archived = sorted(
                (rec.changed, ref, rec.size)
                for ref, rec in list(claims.items())
                if ref.startswith(prefix)
                and rec.archived
                and not state.local.holds(ref)
                and state.local.pending_delta(ref) <= 0
            )
            if not s.archive_enabled:
                doomed += [ref for _, ref, _ in archived]
                continue
            aged = [a for a in archived if now - a[0] >= s.archive_max_retention]
            doomed += [ref for _, ref, _ in aged]
            if s.max_bytes is not None:
                usage = state.usage(c.name) - sum(max(0, size) for _, _, size in aged)
                limit = s.max_bytes * s.archive_max_usage_percentage / 100.0
                for _, ref, size in archived[len(aged) :]:
                    if usage <= limit:
                        break
                    doomed.append(ref)
                    usage -= max(0, size)
        destroyed = destroy(state, doomed)
        if state.ledger.outstanding() >= s.ledger_checkpoint_batches:
            compact(state)
    return destroyed


def compact(state: ContentState) -> bool:
    """Checkpoint the ledger, dropping claims destroyed longer than the grace period ago."""
    with state.cleanup_lock:
        claims = state.refresh()
        cutoff = time.time() - state.settings.orphan_grace_period
        gone = [ref for ref, rec in claims.items() if rec.destroyed and rec.changed < cutoff]
        _delete(state, gone)  # idempotent: a crash may have left some present
        return state.ledger.checkpoint(drop=gone)
