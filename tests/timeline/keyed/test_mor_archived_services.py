"""Merge-on-read table services over a long life, with archival moving completed instants out
of the active timeline: a compaction's plan objects are archived with its commit, so it is
never pending again; nothing that executes or drops a plan deletes what a completed
compaction wrote; a plan that can never complete (an object it reads is gone) is dropped
instead of holding the table."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest

from storage import ObjectStore, StoreSettings, open_store
from tests.support.backends import Backend
from timeline import InstantNotFound, PlanError, Table, TableSettings, start_compaction
from timeline.archive import ArchivalSettings, ArchivedTimeline, Archiver
from timeline.instant import COMPACTION, Instant, State
from timeline.keyed import KeyedProperties
from timeline.keyed.compaction.service import completed_compactions, pending
from timeline.layout import heartbeat_key, instant_key

PROPS = KeyedProperties.of("id", table_type="merge_on_read")
PARTED = KeyedProperties.of("id", partition_by="p", table_type="merge_on_read")


def _store(tmp_path: Path, name: str = "t") -> ObjectStore:
    return open_store(f"file://{tmp_path}/{name}", StoreSettings(fsync=False))


def _values(data: pa.Table) -> dict[int, object]:
    return dict(zip(data.column("id").to_pylist(), data.column("v").to_pylist(), strict=True))


def _compaction_states(t: Table) -> set[str]:
    return {o.key for o in t.store.list("_timeline/instants/") if ".compaction." in o.key}


@pytest.mark.unit
def test_compaction_keeps_running_after_archival_at_the_defaults(tmp_path: Path) -> None:
    """Inline compaction every 5 delta commits, archival 20/30: 60 upserts of the same
    records. Archival moves completed compactions out; the table never takes them for
    pending ones, so every later plan still takes the file group."""
    t = Table.create(_store(tmp_path), PROPS, TableSettings(local_entry_cache=False))
    for v in range(60):
        t.upsert(pa.table({"id": [1, 2, 3], "v": [v] * 3}))
    archived = [r for r in ArchivedTimeline(t.store).records() if r.action == "commit"]
    assert archived, "archival at the defaults archived no compaction in 60 upserts"
    assert pending(t) == []
    assert _values(t.read()) == {1: 59, 2: 59, 3: 59}
    assert _values(t.read(read_optimized=True)) == {1: 59, 2: 59, 3: 59}
    # no plan object of an archived compaction is left in the active timeline
    left = {k.rsplit("/", 1)[-1].split(".")[0] for k in _compaction_states(t)}
    assert not left & {i.time for i in archived}
    t.upsert(pa.table({"id": [1], "v": [60]}))
    assert t.maintenance.compact() is not None  # logs exist: they are compacted
    assert _values(t.read(read_optimized=True))[1] == 60


@pytest.mark.unit
def test_archival_keeps_a_compaction_plan_with_its_commit(tmp_path: Path) -> None:
    arch = ArchivalSettings(keep_min_commits=2, keep_max_commits=3, auto_archive=False)
    s = TableSettings(compaction_mode="off", local_entry_cache=False, archival=arch)
    t = Table.create(_store(tmp_path), PROPS, s)
    t.upsert(pa.table({"id": [1, 2], "v": ["a", "a"]}))
    t.upsert(pa.table({"id": [1], "v": ["b"]}))
    done = t.maintenance.compact()
    assert done is not None
    for v in "cdef":
        t.upsert(pa.table({"id": [2], "v": [v]}))
    result = Archiver(t, arch).run()
    assert done.time in {i.time for i in result.archived}
    assert not any(k.split("/")[-1].startswith(done.time) for k in _compaction_states(t))
    records = ArchivedTimeline(t.store).records(with_bodies=True)
    record = next(r for r in records if r.time == done.time)
    assert record.plan is not None and b"log_anchor_seq" in record.plan  # the plan is archived
    assert pending(t) == []
    assert _values(t.read()) == {1: "b", 2: "f"}


@pytest.mark.unit
def test_plan_objects_left_by_an_older_archiver_are_not_pending(tmp_path: Path) -> None:
    """A table archived before the plan objects went with their commit: they are not a
    pending compaction (the plan does not leave out their groups, archival passes them),
    executing them is a no-op that deletes nothing, and the next archival removes them."""
    arch = ArchivalSettings(keep_min_commits=2, keep_max_commits=3, auto_archive=False)
    s = TableSettings(compaction_mode="off", local_entry_cache=False, archival=arch)
    t = Table.create(_store(tmp_path), PROPS, s)
    t.upsert(pa.table({"id": [1, 2], "v": ["a", "a"]}))
    t.upsert(pa.table({"id": [1], "v": ["b"]}))
    planned = t.maintenance.schedule_compaction()
    assert planned is not None
    req = Instant(planned, COMPACTION, State.REQUESTED)
    plan = t.store.get(instant_key(req))
    assert t.maintenance.run_compaction() == [planned]
    for v in "cdef":
        t.upsert(pa.table({"id": [2], "v": [v]}))
    assert planned in {i.time for i in Archiver(t, arch).run().archived}
    # what an older archiver left behind
    t.store.put_if_absent(instant_key(req), plan)
    t.store.put_if_absent(instant_key(req.with_state(State.INFLIGHT)), b"{}")
    t2 = Table.open(t.store, s)
    assert pending(t2) == []
    assert t2.maintenance.run_compaction(planned) == []  # completed (archived): nothing to execute
    assert _values(t2.read()) == {1: "b", 2: "f"}  # its base file is still there
    t2.upsert(pa.table({"id": [1], "v": ["g"]}))
    assert t2.maintenance.compact() is not None
    Archiver(t2, arch).run()
    assert not any(k.split("/")[-1].startswith(planned) for k in _compaction_states(t2))


@pytest.mark.unit
def test_interleaved_services_never_delete_what_a_snapshot_reads(tmp_path: Path) -> None:
    """Archival at low limits, cleaning, insert_overwrite, clustering and compaction
    interleaved; then `timeline compact` (which executes every pending plan nobody runs).
    The snapshot and the read-optimized read stay readable and equal to the model."""
    arch = ArchivalSettings(keep_min_commits=2, keep_max_commits=3, archive_merge_enable=False)
    s = TableSettings(
        local_entry_cache=False,
        compaction_max_delta_commits=2,
        clustering_small_file_limit=1 << 30,
        heartbeat_interval_ms=200,
        heartbeat_tolerable_misses=1,
        archival=arch,
    )
    t = Table.create(_store(tmp_path), PARTED, s)
    model: dict[int, str] = {}

    def up(ids: list[int], v: str) -> None:
        t.upsert(
            pa.table({"id": ids, "p": ["a" if i % 2 else "b" for i in ids], "v": [v] * len(ids)})
        )
        model.update(dict.fromkeys(ids, v))

    at: dict[str, dict[int, str]] = {}  # write instant -> the model as of it

    def note() -> None:
        for e in t.state().ordered_writes():
            at.setdefault(e.time, dict(model))

    def clean(retained: int) -> None:
        t.maintenance.clean(retained=retained)
        for time in sorted(t.state().writes)[-retained:]:  # what the clean retains
            assert _values(t.read(as_of=time)) == at[time], f"as of {time}"

    for r in range(8):
        up([r * 10 + 1, r * 10 + 2], f"n{r}")  # new file groups
        note()
        up([1, 2], f"u{r}")  # logs on the first groups
        note()
        if r == 6:
            up([1], "w")  # one delta commit: below the inline trigger
            note()
            t.maintenance.schedule_compaction()  # a plan left pending through what follows
        if r % 3 == 1:
            clean(retained=1 + r % 2)
        if r == 3:
            t.write(pa.table({"id": [2, 4], "p": ["b", "b"], "v": ["o", "o"]}), mode="overwrite")
            for k in [k for k in model if k % 2 == 0]:
                del model[k]
            model.update({2: "o", 4: "o"})
            note()
        if r == 5:
            t.maintenance.cluster("p=b")
            note()
        if r != 6:
            t.maintenance.compact()
            note()
        assert _values(t.read()) == model, f"round {r}"
    clean(retained=2)
    fresh = Table.open(t.store, s)
    fresh.maintenance.run_compaction()  # `flowledger timeline compact`: every plan nobody runs
    assert pending(fresh) == []
    assert _values(fresh.read()) == model
    fresh.maintenance.compact()
    assert _values(fresh.read(read_optimized=True)) == model
    on_disk = {o.key for o in t.store.list("data/")}
    assert {f.path for f in fresh.snapshot().files} <= on_disk
    assert completed_compactions(fresh.state())


def test_a_plan_whose_input_is_gone_is_dropped_not_left_pending(tbackend: Backend) -> None:
    """An object a compaction plan reads is missing (damage): executing it fails with one
    clear error and drops the plan, so it does not hold its file groups out of later plans
    nor stop archival; compaction of the table goes on."""
    s = TableSettings(compaction_mode="off", local_entry_cache=False)
    s = replace(s, archival=replace(s.archival, auto_archive=False))
    t = Table.create(tbackend.open().scoped("tables/mor"), PARTED, s)
    t.upsert(pa.table({"id": [1, 2], "p": ["a", "b"], "v": ["x", "x"]}))
    t.upsert(pa.table({"id": [1, 2], "p": ["a", "b"], "v": ["y", "y"]}))
    planned = t.maintenance.schedule_compaction()
    assert planned is not None
    broken = next(f for f in t.snapshot().files if f.partition == "p=a")
    t.store.delete(broken.path)
    with pytest.raises(PlanError, match="missing"):
        t.maintenance.run_compaction()
    assert pending(t) == []
    assert not [o for o in t.store.list(f"data/{planned}/")]  # its half-written files too
    with pytest.raises(InstantNotFound):
        t.maintenance.run_compaction(planned)  # dropped: nothing pending under that time
    t.write(pa.table({"id": [3], "p": ["a"], "v": ["z"]}), mode="overwrite")  # repaired
    t.upsert(pa.table({"id": [2], "p": ["b"], "v": ["w"]}))
    assert t.maintenance.compact() is not None
    assert _values(t.read(read_optimized=True)) == {2: "w", 3: "z"}
    assert len(completed_compactions(t.state())) == 1


@pytest.mark.unit
def test_inline_compaction_executes_a_plan_its_crashed_executor_left(tmp_path: Path) -> None:
    """A compaction left inflight by an executor that died (its heartbeat expired) would hold
    its file groups out of every later plan and stop archival: the next delta commit's
    inline compaction executes it, as Hudi's inline compaction runs pending ones."""
    s = TableSettings(local_entry_cache=False, compaction_max_delta_commits=3)
    t = Table.create(_store(tmp_path), PROPS, s)
    t.upsert(pa.table({"id": [1, 2], "v": ["a", "a"]}))
    t.upsert(pa.table({"id": [1], "v": ["b"]}))
    planned = t.maintenance.schedule_compaction()
    assert planned is not None
    run = start_compaction(t, planned)
    assert run is not None
    run.abandon()  # the executor dies after `compaction.inflight`
    t.store.delete(heartbeat_key(planned))  # ... long ago: its heartbeat expired
    t.upsert(pa.table({"id": [2], "v": ["c"]}))
    assert pending(t) == []
    assert planned in completed_compactions(t.state())
    assert _values(t.read()) == {1: "b", 2: "c"}
