"""Archival rules, mirroring Hudi's TestHoodieTimelineArchiver, on the local FS and MinIO."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pytest

from tests.support.backends import Backend
from timeline import COMPACTION, REPLACE_COMMIT, Table, TableSettings
from timeline.archive import (
    ArchivalSettings,
    ArchivedTimeline,
    Archiver,
    combined_timeline,
    load_active,
    read_manifest,
    table_state,
)
from timeline.instant import WRITE_ACTIONS

MIN4_MAX5 = ArchivalSettings(keep_min_commits=4, keep_max_commits=5)


def new_table(backend: Backend, name: str = "t") -> Table:
    return Table.open(backend.open().scoped(f"tables/{name}"), TableSettings())


def commit(table: Table) -> str:
    """An empty commit (archival only looks at instants)."""
    txn = table.begin()
    txn.commit()
    return txn.instant_time


def write(table: Table, k: int, mode: str = "append") -> str:
    return table.write(pa.table({"id": [k]}), mode=mode).time


def active_commits(table: Table) -> list[str]:
    tl = load_active(table.tl).timeline
    return [i.time for i in tl.completed() if i.action in WRITE_ACTIONS]


def archived_times(table: Table, action: str | None = None) -> list[str]:
    recs = ArchivedTimeline(table.store).records()
    return [r.time for r in recs if action is None or r.action == action]


def assert_consistent(table: Table, commits: list[str]) -> None:
    """No holes: the active commits are the newest ones; archived + active = every commit,
    each exactly once; the table state still sees every write."""
    active = active_commits(table)
    assert active == commits[len(commits) - len(active) :], "hole in the active timeline"
    combined = combined_timeline(table)
    seen = Counter((i.time, i.action) for i in combined)
    assert all(n == 1 for n in seen.values())
    assert [i.time for i in combined.completed() if i.action in WRITE_ACTIONS] == commits
    assert [r.time for r in ArchivedTimeline(table.store).records()] == sorted(
        set(archived_times(table))
    )


def test_empty_table_archives_nothing(tbackend: Backend) -> None:
    table = new_table(tbackend)
    result = Archiver(table, MIN4_MAX5).run()
    assert result.archived == () and result.file == ""
    assert read_manifest(table.store).files == ()


def test_min4_max5(tbackend: Backend) -> None:
    table = new_table(tbackend)
    archiver = Archiver(table, MIN4_MAX5)
    commits: list[str] = []
    for _ in range(5):
        commits.append(commit(table))
        assert archiver.run().archived == ()  # nothing through commit 5
    commits.append(commit(table))
    result = archiver.run()
    assert [i.time for i in result.archived] == commits[:2]  # commit 6: 1-2 go, 3-6 stay
    assert active_commits(table) == commits[2:6]
    assert_consistent(table, commits)
    commits.append(commit(table))
    assert archiver.run().archived == ()
    commits.append(commit(table))
    assert [i.time for i in archiver.run().archived] == commits[2:4]  # commit 8: 3-4 go
    assert active_commits(table) == commits[4:]
    assert archived_times(table) == commits[:4]
    assert_consistent(table, commits)
    # the archive keeps each commit's metadata; the log is never touched
    assert ArchivedTimeline(table.store).entry(commits[0]).time == commits[0]
    assert len(list(table.store.list("_timeline/log/"))) == 8


@pytest.mark.parametrize("beyond", [False, True], ids=["stop-at-savepoint", "beyond"])
def test_savepoint(tbackend: Backend, beyond: bool) -> None:
    table = new_table(tbackend)
    commits = [write(table, k) for k in range(3)]
    table.maintenance.savepoint(commits[2])
    commits += [write(table, k) for k in range(3, 8)]
    settings = ArchivalSettings(
        keep_min_commits=4, keep_max_commits=5, archive_beyond_savepoint=beyond
    )
    result = Archiver(table, settings).run()
    if beyond:  # everything down to min=4 but C3 and its savepoint
        assert [i.time for i in result.archived] == [commits[i] for i in (0, 1, 3, 4)]
        assert active_commits(table) == [commits[i] for i in (2, 5, 6, 7)]
    else:
        assert [i.time for i in result.archived] == commits[:2]
        assert "savepoint" in result.limit_reason
        assert active_commits(table) == commits[2:]
    sp = load_active(table.tl).timeline.actions("savepoint")
    assert [i.time for i in sp] == [commits[2]]
    # every row stays readable through the archive checkpoint
    assert table_state(table.tl).snapshot().rows == 8


def test_pending_clustering_at_start_blocks(tbackend: Backend) -> None:
    table = new_table(tbackend)
    clustering = table.begin(REPLACE_COMMIT, plan={"metadata": {"groups": []}})
    clustering._heartbeat.stop()
    commits = [commit(table) for _ in range(8)]
    result = Archiver(table, MIN4_MAX5).run()
    assert result.archived == ()
    assert "pending replacecommit" in result.limit_reason
    assert active_commits(table) == commits


def test_inflight_compaction_blocks_until_complete(tbackend: Backend) -> None:
    table = new_table(tbackend)
    commits = [commit(table) for _ in range(3)]
    compaction = table.begin(COMPACTION)
    commits += [commit(table) for _ in range(5)]
    archiver = Archiver(table, MIN4_MAX5)
    result = archiver.run()
    assert [i.time for i in result.archived] == commits[:3]  # stops before the compaction
    assert "pending compaction" in result.limit_reason
    assert archiver.run().archived == ()  # still blocked: 5 commits remain, nothing after it
    compaction.commit()
    every = sorted([*commits, compaction.instant_time])
    result = archiver.run()  # 6 completed commits (compaction included) > 5: two go
    assert [i.time for i in result.archived] == [compaction.instant_time, commits[3]]
    assert_consistent(table, every)


def test_clean_and_rollback_archived_with_commits(tbackend: Backend) -> None:
    table = new_table(tbackend)
    w = [write(table, 0)]
    failed = table.begin()
    failed._heartbeat.stop()
    rollback = table.maintenance.rollback(failed.instant_time)
    w.append(write(table, 1, mode="overwrite"))  # replaces w0's file
    clean1 = table.maintenance.clean(retained=1)
    assert clean1 is not None
    w += [write(table, k) for k in range(2, 8)]
    w.append(write(table, 8, mode="overwrite"))
    clean2 = table.maintenance.clean(retained=1)
    assert clean2 is not None
    result = Archiver(table, MIN4_MAX5).run()
    archived = {(i.time, i.action) for i in result.archived}
    # cleaner retention (clean2 retains from w8) stops commits before w8; 9 commits - min 4
    assert [i.time for i in result.archived if i.action in WRITE_ACTIONS] == w[:5]
    assert (rollback.time, "rollback") in archived
    assert (clean1.time, "clean") in archived
    assert (clean2.time, "clean") not in archived
    assert_consistent(table, w)
    assert sorted(table_state(table.tl).snapshot().paths()) == sorted(table.snapshot().paths())


def test_rollback_of_a_completed_commit_stays_undone(tbackend: Backend) -> None:
    table = new_table(tbackend)
    w = [write(table, k) for k in range(3)]
    undone = w.pop()
    table.maintenance.rollback(undone)  # removes its completed object; only the rollback says so
    w += [write(table, k) for k in range(3, 9)]
    result = Archiver(table, MIN4_MAX5).run()
    assert "rollback" in {i.action for i in result.archived}
    assert undone not in [i.time for i in load_active(table.tl).timeline]
    assert undone not in combined_timeline(table).times()
    assert_consistent(table, w)
    assert table_state(table.tl).snapshot().rows == len(w)


def test_batched_deletes_keep_the_same_outcome(tbackend: Backend) -> None:
    table = new_table(tbackend)
    commits = [commit(table) for _ in range(9)]
    settings = ArchivalSettings(
        keep_min_commits=4, keep_max_commits=5, archive_completed_delete_batch=2
    )
    assert [i.time for i in Archiver(table, settings).run().archived] == commits[:5]
    assert active_commits(table) == commits[5:]
    assert_consistent(table, commits)
    left = [o.key for o in table.store.list("_timeline/instants/")]
    assert len(left) == 4 * 3  # requested, inflight, completed of each active commit
