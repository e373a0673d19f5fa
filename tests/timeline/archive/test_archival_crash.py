"""Kill -9 an archiver at every step of an archival run and of a merge, then recover:
every instant is in the archive or the active timeline exactly once, nothing is pending,
no leftover objects remain, every row stays readable. Local FS and MinIO."""

from __future__ import annotations

import multiprocessing
import signal
from collections import Counter

import pyarrow as pa
import pytest

from tests.support.backends import Backend
from timeline import Table
from timeline.archive import (
    ArchivalSettings,
    ArchivedTimeline,
    Archiver,
    combined_timeline,
    load_active,
    read_manifest,
    table_state,
)
from timeline.archive.layout import ARCHIVE, CHECKPOINTS
from timeline.crash import ENV
from timeline.instant import WRITE_ACTIONS

ARCHIVE_STEPS = [
    "planned",
    "claimed",
    "written",
    "committed",
    "pending_deleted",
    "completed_deleted",
    "done",
]
MERGE_STEPS = ["planned", "claimed", "written", "committed", "candidate_deleted", "done"]
NO_MERGE = ArchivalSettings(keep_min_commits=2, keep_max_commits=3, archive_merge_enable=False)
MERGE3 = ArchivalSettings(
    keep_min_commits=2,
    keep_max_commits=3,
    archive_merge_files_batch_size=3,
    archive_lease_ms=0,  # the crashed run's claim may be discarded at once
)
RECOVER = ArchivalSettings(
    keep_min_commits=2, keep_max_commits=3, archive_merge_enable=False, archive_lease_ms=0
)


def _write(table: Table, k: int) -> str:
    return table.write(pa.table({"id": [k]})).time


def _setup(kind: str, table: Table) -> list[str]:
    if kind == "archive":
        return [_write(table, k) for k in range(6)]
    commits = [_write(table, k) for k in range(4)]
    Archiver(table, NO_MERGE).run()
    for k in range(4, 8, 2):  # two more runs: three small archive files
        commits += [_write(table, k), _write(table, k + 1)]
        Archiver(table, NO_MERGE).run()
    assert len(read_manifest(table.store).files) == 3
    return commits


def _child(backend: Backend, prefix: str, kind: str, point: str) -> None:
    import os

    os.environ[ENV] = point
    table = Table.open(backend.open().scoped(prefix))
    archiver = Archiver(table, NO_MERGE if kind == "archive" else MERGE3)
    if kind == "archive":
        archiver.run(merge=False)
    else:
        archiver.run(merge=True)


def _check(table: Table, commits: list[str], where: str) -> None:
    m = read_manifest(table.store)
    assert m.pending is None, where
    combined = combined_timeline(table)
    seen = Counter((i.time, i.action) for i in combined)
    assert set(seen.values()) == {1}, where
    assert [i.time for i in combined.completed() if i.action in WRITE_ACTIONS] == commits, where
    active = [i.time for i in load_active(table.tl).timeline.completed()]
    assert active == commits[len(commits) - len(active) :], f"{where}: hole"
    records = ArchivedTimeline(table.store).records()
    assert sum(f.count for f in m.files) == len(records), f"{where}: duplicate in archive"
    assert table_state(table.tl).snapshot().rows == len(commits), where
    left = {o.key for p in (ARCHIVE, CHECKPOINTS) for o in table.store.list(p)}
    assert left == {f.key for f in m.files} | {m.checkpoint}, f"{where}: leftovers {left}"
    assert len(list(table.store.list("_timeline/log/"))) >= len(commits), where


@pytest.mark.parametrize("kind", ["archive", "merge"])
def test_kill_at_every_step_then_recover(tbackend: Backend, kind: str) -> None:
    steps = ARCHIVE_STEPS if kind == "archive" else MERGE_STEPS
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(
        ["timeline", "pyarrow", "fastavro", "boto3", "tests.support.backends"]
    )
    cases = []
    for step in steps:
        prefix = f"tables/{kind}-{step}"
        commits = _setup(kind, Table.open(tbackend.open().scoped(prefix)))
        child = ctx.Process(target=_child, args=(tbackend, prefix, kind, f"{kind}.{step}"))
        child.start()
        cases.append((step, prefix, commits, child))
    for step, _, _, child in cases:
        child.join(120)
        assert child.exitcode == -signal.SIGKILL, f"{kind}.{step} was never reached"
    for step, prefix, commits, _ in cases:
        table = Table.open(tbackend.open().scoped(prefix))
        where = f"{kind}@{step}"
        result = Archiver(table, MERGE3 if kind == "merge" else RECOVER).run(sweep=True)
        _check(table, commits, where)
        if kind == "merge":
            assert len(read_manifest(table.store).files) == 1, where  # merged, or re-merged
        else:
            assert len(load_active(table.tl).timeline.completed()) == 2, where
        if step in ("committed", "pending_deleted", "completed_deleted", "candidate_deleted"):
            assert any(r.startswith("finished") for r in result.recovered), where
        # and it keeps working
        commits += [_write(table, 100 + k) for k in range(3)]
        Archiver(table, RECOVER).run()
        _check(table, commits, f"{where} (after)")
