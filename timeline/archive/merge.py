"""Merging small archive files under a merge plan (Hudi's mergeArchiveFilesIfNecessary).

S3 cannot append, so each archival run writes a new file; when at least
`archive_merge_files_batch_size` consecutive files (newest first) are smaller than
`archive_merge_small_file_limit_bytes`, they are rewritten as one:

  1. PUT the merge plan (candidates, target name)         create-only
  2. claim the manifest (pending = the plan)              CAS
  3. PUT the merged file                                  create-only
  4. swap candidates for the merged file in the manifest  CAS: the commit point
  5. delete the candidates, clear pending, delete the plan

Readers use the manifest's file list, so they see either the candidates or the merged file,
never both and never neither. Recovery (`recover_merge`): an unreadable plan is discarded;
if the swap did not happen (all candidates still listed and present) the half-written merged
file is discarded; otherwise the deletion of the candidates is finished.
"""

from __future__ import annotations

import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from storage import NotFound, ObjectStore, checksum_of

from .. import crash
from ..settings import ArchivalSettings
from .errors import ArchiveConflict, CorruptArchive
from .format import FORMAT, decode_archive, decode_json, dedupe, encode_archive, encode_json
from .layout import archive_file_key, plan_key
from .manifest import MERGE_RUN, ArchiveFile, Manifest, Pending, swap


def merge_candidates(m: Manifest, settings: ArchivalSettings) -> list[ArchiveFile]:
    """Consecutive small files, walking from the newest; [] if fewer than the batch size."""
    small: list[ArchiveFile] = []
    for f in sorted(m.files, key=lambda f: (f.min_time, f.max_time, f.key), reverse=True):
        if f.size >= settings.archive_merge_small_file_limit_bytes:
            break
        small.append(f)
    if len(small) < settings.archive_merge_files_batch_size:
        return []
    return sorted(small, key=lambda f: (f.min_time, f.max_time, f.key))


def load_files(store: ObjectStore, files: list[ArchiveFile], parallelism: int) -> list[bytes]:
    with ThreadPoolExecutor(
        max(1, min(parallelism, len(files))), "flowledger-archive-load"
    ) as pool:
        return list(pool.map(lambda f: f.read(store), files))


def merge_files(
    store: ObjectStore, m: Manifest, settings: ArchivalSettings, writer: str
) -> str | None:
    """Merge small archive files if enough exist; returns the merged file's key."""
    if m.pending is not None:
        raise ArchiveConflict(f"{m.pending.kind} run {m.pending.plan_key} is running")
    cands = merge_candidates(m, settings)
    if not cands:
        return None
    nonce = uuid.uuid4().hex[:16]
    target = archive_file_key(min(f.min_time for f in cands), max(f.max_time for f in cands), nonce)
    pkey = plan_key(MERGE_RUN, nonce)
    plan = {
        "format": FORMAT,
        "kind": MERGE_RUN,
        "writer": writer,
        "target": target,
        "candidates": [f.to_json() for f in cands],
    }
    store.put_if_absent(pkey, encode_json(plan))
    crash.point("merge.planned")
    pending = Pending(MERGE_RUN, pkey, target, writer, time.time())
    try:
        m1 = swap(store, m, m.evolve(pending=pending))
    except ArchiveConflict:
        store.delete(pkey)
        raise
    crash.point("merge.claimed")
    blobs = load_files(store, cands, settings.archive_read_parallelism)
    records = dedupe(
        r for f, b in zip(cands, blobs, strict=True) for r in decode_archive(b, store.url(f.key))
    )
    data = encode_archive(records, settings.archival_batch_size)
    store.put_if_absent(target, data)
    crash.point("merge.written")
    gone = {f.key for f in cands}
    merged = ArchiveFile(
        target, records[0].time, records[-1].time, len(records), len(data), checksum_of(data)
    )
    files = sorted(
        [*(f for f in m1.files if f.key not in gone), merged], key=lambda f: (f.min_time, f.key)
    )
    try:
        m2 = swap(
            store, m1, m1.evolve(files=tuple(files), pending=replace(pending, committed=True))
        )
    except ArchiveConflict:
        store.delete(target)  # our claim was discarded (lease expired): nothing changed
        raise
    crash.point("merge.committed")
    finish_merge(store, m2, [f.key for f in cands])
    return target


def finish_merge(store: ObjectStore, m: Manifest, candidates: list[str]) -> None:
    """After the swap: delete the candidates, clear pending, delete the plan (idempotent)."""
    assert m.pending is not None
    for n, key in enumerate(candidates):
        store.delete(key)
        if n == 0:
            crash.point("merge.candidate_deleted")
    swap(store, m, m.evolve(pending=None))
    store.delete(m.pending.plan_key)
    crash.point("merge.done")


def recover_merge(store: ObjectStore, m: Manifest, settings: ArchivalSettings) -> str:
    p = m.pending
    assert p is not None and p.kind == MERGE_RUN
    try:
        plan = decode_json(store.get(p.plan_key), store.url(p.plan_key))
        candidates = [str(f["key"]) for f in plan["candidates"]]
    except (NotFound, CorruptArchive, KeyError, TypeError):
        # Clear the claim first: the CAS proves `m` is current (the plan may be missing only
        # because its run just finished, and then the target is a committed file).
        swap(store, m, m.evolve(pending=None))
        if not p.committed:
            store.delete(p.target)
        store.delete(p.plan_key)
        return f"discarded unreadable merge plan {store.url(p.plan_key)}"
    if not p.committed:
        # The swap did not happen, so every candidate is still listed and present (they are
        # deleted only after it): the merged file is a half-done copy.
        if not p.lease_expired(settings.archive_lease_ms):
            raise ArchiveConflict(f"a merge claimed by {p.writer} is running ({p.plan_key})")
        swap(store, m, m.evolve(pending=None))  # first: proves the claim is still current
        store.delete(p.target)
        store.delete(p.plan_key)
        return f"discarded half-written merged file {store.url(p.target)}"
    finish_merge(store, m, candidates)
    return f"finished merge into {store.url(p.target)}"
