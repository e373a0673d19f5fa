"""Compaction of merge-on-read tables as a Spark job (`flowledger.spark.compact`), local mode:
the same plan executed by Spark and by the Python compaction writes the same base files and
gives the same snapshot and read-optimized reads; a delta commit landing while the job runs
still lands; a job that fails after writing base files leaves them unread and is re-executed."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import flowledger.spark as fs
import flowledger.spark.compaction as spark_compaction
from storage import StoreSettings, open_store
from timeline import COMMIT, COMPACTION, Table, TableSettings
from timeline.instant import State
from timeline.keyed import KeyedProperties
from timeline.layout import data_prefix

pytestmark = pytest.mark.spark

PROPS = KeyedProperties.of("id", ordering_field="ts", partition_by="p", table_type="merge_on_read")
OFF = TableSettings(compaction_mode="off", local_entry_cache=False)


def _rows(ids: list[int], v: str, ts: int = 1) -> pa.Table:
    return pa.table(
        {
            "id": ids,
            "ts": [ts] * len(ids),
            "p": ["a" if i % 2 else "b" for i in ids],
            "v": [v] * len(ids),
        }
    )


def _store(root: Path) -> Any:
    return open_store(f"file://{root}", StoreSettings(fsync=False))


def _mor_table(root: Path) -> Table:
    """A merge-on-read table whose file groups carry logs: updates, deletes, new keys."""
    t = Table.create(_store(root), PROPS, OFF)
    t.upsert(_rows(list(range(40)), "base"))
    t.upsert(_rows(list(range(0, 40, 3)), "u1", ts=2))
    t.delete(pa.table({"id": [5, 6, 7], "ts": [9, 9, 9]}))
    t.upsert(pa.concat_tables([_rows(list(range(1, 40, 4)), "u2", ts=3), _rows([40, 41], "n")]))
    return t


def _sorted(data: pa.Table) -> list[dict[str, Any]]:
    return sorted(data.to_pylist(), key=lambda r: r["id"])


def _reads(root: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    t = Table.open(_store(root), OFF)
    return _sorted(t.read()), _sorted(t.read(read_optimized=True))


def _compaction_files(root: Path, t: str) -> list[tuple[str, str | None, int]]:
    table = Table.open(_store(root), OFF)
    e = table.entry(t)
    assert e.action == COMMIT and e.metadata["operation"] == "compact"
    return sorted((f.path, f.checksum, f.rows) for f in e.added)


def test_spark_and_python_execute_a_plan_alike(spark: Any, tmp_path: Path) -> None:
    before = _mor_table(tmp_path / "spark")
    snapshot_before, ro_before = _reads(tmp_path / "spark")
    assert snapshot_before != ro_before  # logs not folded yet
    t = before.maintenance.schedule_compaction()
    assert t is not None
    shutil.copytree(tmp_path / "spark", tmp_path / "python")  # one plan, two executors
    assert Table.open(_store(tmp_path / "python"), OFF).maintenance.run_compaction(t) == [t]

    assert fs.compact(spark, str(tmp_path / "spark")) == [t]

    # The same base files (names fixed by the plan, byte-identical), the same reads.
    assert _compaction_files(tmp_path / "spark", t) == _compaction_files(tmp_path / "python", t)
    spark_reads = _reads(tmp_path / "spark")
    assert spark_reads == _reads(tmp_path / "python")
    assert spark_reads[0] == snapshot_before  # compaction changes no record
    assert spark_reads[1] == snapshot_before  # ... and the base files now hold every one
    table = Table.open(_store(tmp_path / "spark"), OFF)
    meta = table.entry(t).metadata
    assert meta["extra"][spark_compaction.ENGINE_KEY] == "spark"
    assert {s["log_files"] for s in meta["write_stats"]} != {0}
    assert fs.compact(spark, str(tmp_path / "spark")) == []  # nothing left to fold


def test_schedules_a_plan_when_none_is_pending(spark: Any, tmp_path: Path) -> None:
    _mor_table(tmp_path / "t")
    snapshot, _ = _reads(tmp_path / "t")
    done = fs.compact(spark, str(tmp_path / "t"))
    assert len(done) == 1
    assert _reads(tmp_path / "t") == (snapshot, snapshot)
    table = Table.open(_store(tmp_path / "t"), OFF)
    states = [(i.action, i.state) for i in table.tl.states.of_time(done[0])]
    assert (COMPACTION, State.REQUESTED) in states  # the plan the driver scheduled
    assert table.entry(done[0]).action == COMMIT


def test_a_delta_commit_landing_during_the_job_lands(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "t"
    _mor_table(root)
    real = spark_compaction.execute_on_spark
    landed: list[str] = []

    def job_then_writer(*args: Any, **kwargs: Any) -> Any:
        out = real(*args, **kwargs)
        # Base files written, compaction not complete: another writer updates keys of the
        # file groups being compacted, and a new key.
        writer = Table.open(_store(root), OFF)
        landed.append(writer.upsert(_rows([0, 1, 2, 99], "late", ts=9)).time)
        return out

    monkeypatch.setattr(spark_compaction, "execute_on_spark", job_then_writer)
    done = fs.compact(spark, str(root))
    assert len(done) == 1 and landed
    table = Table.open(_store(root), OFF)
    assert table.entry(landed[0]).action == "deltacommit"
    assert table.entry(done[0]).action == COMMIT
    snapshot, ro = _reads(root)
    values = {r["id"]: r["v"] for r in snapshot}
    assert [values[i] for i in (0, 1, 2, 99)] == ["late"] * 4
    # The late delta commit's logs belong to the new slices: the compacted bases do not hold
    # it (read-optimized), the snapshot merges it on top of them.
    ro_values = {r["id"]: r["v"] for r in ro}
    assert [ro_values[i] for i in (0, 1, 2)] == ["u1", "u2", "base"]


def test_a_job_that_fails_after_writing_base_files_is_re_executed(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "t"
    t = _mor_table(root).maintenance.schedule_compaction()
    assert t is not None
    shutil.copytree(root, tmp_path / "python")
    assert Table.open(_store(tmp_path / "python"), OFF).maintenance.run_compaction(t) == [t]
    before = _reads(root)

    def driver_lost(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("driver lost before completing")

    monkeypatch.setattr(spark_compaction, "complete_compaction", driver_lost)
    with pytest.raises(RuntimeError):
        fs.compact(spark, str(root))
    table = Table.open(_store(root), OFF)
    assert [(i.time, i.state) for i in table.timeline().pending()] == [(t, State.INFLIGHT)]
    assert any(o.key.endswith(".parquet") for o in table.store.list(data_prefix(t)))
    assert _reads(root) == before  # the written base files are in no commit: never read

    monkeypatch.undo()
    assert fs.compact(spark, str(root), instant=t) == [t]
    assert _compaction_files(root, t) == _compaction_files(tmp_path / "python", t)
    assert _reads(root) == _reads(tmp_path / "python")


def test_a_failed_task_leaves_the_plan_for_the_next_run(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "t"
    t = _mor_table(root).maintenance.schedule_compaction()
    assert t is not None
    before = _reads(root)
    log = sorted([*root.rglob("*.log"), *root.rglob("*.log.*")])[0]
    good = log.read_bytes()
    log.write_bytes(b"not a log block" + good[15:])  # its checksum no longer matches
    with pytest.raises(Exception, match=r"(?i)checksum|integrity"):
        fs.compact(spark, str(root))
    log.write_bytes(good)
    assert _reads(root) == before
    # The failed run stopped its heartbeat: the plan counts as abandoned, and the next run
    # (no instant named) picks it up rather than planning another.
    assert fs.compact(spark, str(root)) == [t]
    assert _reads(root) == (before[0], before[0])
