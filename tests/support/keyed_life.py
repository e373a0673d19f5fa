"""The life of a keyed table as a hypothesis state machine: every write operation and every
table service as a rule, the reference model of tests/support/keyed_model.py as the truth,
and after every step all read paths compared with it (tests/timeline/keyed/test_keyed_life.py).

Tables are tiny on purpose: files of a few KB, row groups of a few rows, a bloom filter that
answers "maybe" half the time, archival after 4 completed commits down to 2, a cleaner that
keeps 2 or 3 commits, so a few dozen steps reach every path (small-file routing, new file
groups, index lookups that must read files, archived compactions, cleaned slices).

Errors a read may legitimately raise are named here and nothing else is accepted: a time
travel to an instant whose files the cleaner removed ("its files were cleaned"), and an
incremental or CDC read over archived instants or cleaned slices (`RangeNotReadable`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import event as hypothesis_event
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from storage import ObjectStore
from tests.support.keyed_model import (
    KeyedModel,
    Row,
    cdc_rows,
    table_rows,
)
from tests.support.life_config import (
    ARCHIVAL,
    CONFIGS,
    SCHEMA,
    LifeConfig,
    composite_keys,
    life_settings,
    rows_strategy,
)
from tests.support.life_stores import StoreFactory
from tests.support.paths import REPO_ROOT
from timeline import (
    CommitConflict,
    DuplicateKeys,
    InstantNotFound,
    PlanError,
    RangeNotReadable,
    Table,
    TimelineError,
    check_table,
)
from timeline.archive import Archiver
from timeline.keyed import KeyedProperties, build_index

#: Figures of every machine run in this process (steps, configurations, accepted refusals).
FIGURES: Counter[str] = Counter()


def _event(name: str) -> None:
    """A hypothesis event, also counted in FIGURES (what the rules did)."""
    hypothesis_event(name)
    FIGURES[name] += 1


def waived(check: str) -> bool:
    """FLOWLEDGER_LIFE_WAIVE=name,...: checks a soak skips to look past a failure it already
    found (`latest-cleaned`: time travel to the latest instant refused as cleaned)."""
    return check in os.environ.get("FLOWLEDGER_LIFE_WAIVE", "").split(",")


def _cleaned_refusal(e: TimelineError) -> bool:
    return type(e) is TimelineError and "were cleaned" in str(e)


class KeyedLife(RuleBasedStateMachine):
    """One table's life. Subclasses set `factory` and `table_type` (see `machine`)."""

    factory: StoreFactory
    table_type: str = "merge_on_read"

    def __init__(self) -> None:
        super().__init__()
        self.store: ObjectStore | None = None
        self.cfg: LifeConfig | None = None
        self.model = KeyedModel("commit_time", "global")
        self.times: list[str] = []
        self.last_seq = 0
        self.cleaned = False
        self.since_process = 0
        self.writer: Table | None = None

    # -- setup ----------------------------------------------------------------------------------
    def create_table(self, cfg: LifeConfig) -> None:
        """The machine's first step (`machine` makes it the initialize rule)."""
        self.cfg = cfg
        FIGURES["runs"] += 1
        FIGURES[f"config {cfg.name}"] += 1
        self.store = self.factory.open()
        composite = composite_keys()
        self.props = KeyedProperties.of(
            ["p", "id"] if composite else "id",
            ordering_field="ts",
            partition_by="p",
            merge_mode=cfg.merge_mode,
            key_scope=cfg.key_scope,
            table_type=cfg.table_type,
        )
        self.settings = life_settings(cfg)
        self.table = Table.create(self.store, self.props, self.settings)
        # A composite key (p, id) identifies a record by its partition value too.
        self.model = KeyedModel(cfg.merge_mode, "partition" if composite else cfg.key_scope)
        creation = self.table.timeline().completed().last()
        assert creation is not None, "a new keyed table has its creation commit"
        self.times = [creation.time]
        self.last_seq = self.table.state().writes[creation.time].seq
        if cfg.record_index:
            build_index(self.table)  # an `indexing` instant: no write, no step
            self._sync(None, None)

    def teardown(self) -> None:
        if self.store is not None:
            self.factory.dispose(self.store)

    # -- bookkeeping ----------------------------------------------------------------------------
    def _sync(self, done: str | None, change: Callable[[], None] | None) -> None:
        """Give the model one step per write the table completed since the last step: the
        operation's own (`change`) and any it caused (an inline compaction: no change)."""
        FIGURES["steps"] += 1
        self.since_process += 1
        seen = False
        for e in self.table.state().ordered_writes():
            if e.seq <= self.last_seq:
                continue
            assert e.time not in self.times, f"{e.action} {e.time} completed a second time"
            if e.time == done and change is not None:
                change()
                seen = True
            else:
                self.model.unchanged()
                _event(f"completed as a side effect: {e.action}")
            self.times.append(e.time)
            self.last_seq = e.seq
        assert done is None or seen or change is None, f"{done} completed but is not a write"

    def _write(self, what: str, change: Callable[[], None], op: Callable[[Table], Any]) -> None:
        done = op(self.table)
        _event(what)
        self._sync(None if done is None else done.time, change)

    # -- writes ---------------------------------------------------------------------------------
    @rule(rows=rows_strategy())
    def upsert(self, rows: list[Row]) -> None:
        data = pa.Table.from_pylist(rows, SCHEMA)
        self._write("upsert", lambda: self.model.upsert(rows), lambda t: t.upsert(data))

    @rule(rows=rows_strategy(), policy=st.sampled_from(["drop", "fail"]))
    def insert(self, rows: list[Row], policy: str) -> None:
        data = pa.Table.from_pylist(rows, SCHEMA)
        if policy == "fail" and self.model.existing(rows):
            try:
                self.table.insert(data)
            except DuplicateKeys:
                _event("insert refused: duplicate keys")
                return
            raise AssertionError(f"insert of stored keys {self.model.existing(rows)} committed")
        self._write(
            f"insert {policy}",
            lambda: self.model.upsert(rows, insert_only=True),
            lambda t: t.insert(data, on_duplicate=policy),
        )

    @rule(rows=rows_strategy(), ordered=st.booleans())
    def delete_keys(self, rows: list[Row], ordered: bool) -> None:
        cols = ["id", "ts", "p"] if ordered else ["id", "p"]
        keys = pa.Table.from_pylist(rows, SCHEMA).select(cols)
        self._write(
            "delete by keys",
            lambda: self.model.delete(rows, has_ordering=ordered),
            lambda t: t.delete(keys),
        )

    @rule(value=st.sampled_from(["x", "y", "z"]), sql=st.booleans())
    def delete_where(self, value: str, sql: bool) -> None:
        where: Any = f"v = '{value}'" if sql else pc.field("v") == value
        self._write(
            "delete where " + ("sql" if sql else "expression"),
            lambda: self.model.delete_where_v(value),
            lambda t: t.delete(where=where),
        )

    @rule(rows=rows_strategy(4))
    def insert_overwrite(self, rows: list[Row]) -> None:
        if self.model.key_scope == "global":  # (never with a composite key)
            # insert_overwrite looks nothing up: a global key stored in a partition it does not
            # replace would then be held twice (documented, as in Hudi); such rows are left out.
            rows = self.model.combined(rows)
            while True:
                parts = {r["p"] for r in rows}
                elsewhere = {
                    row["id"] for row, _ in self.model.states[-1].values() if row["p"] not in parts
                }
                kept = [r for r in rows if r["id"] not in elsewhere]
                if kept == rows:
                    break
                rows = kept
            if not rows:
                return
        data = pa.Table.from_pylist(rows, SCHEMA)
        self._write(
            "insert_overwrite",
            lambda: self.model.insert_overwrite(rows),
            lambda t: t.write(data, mode="overwrite"),
        )

    @rule(rows=rows_strategy(3), delete=st.booleans())
    def second_writer(self, rows: list[Row], delete: bool) -> None:
        """Another handle (another writer's process) writes; this one must see it."""
        if self.writer is None:
            self.writer = Table.open(self.table.store, self.settings)
        data = pa.Table.from_pylist(rows, SCHEMA)
        try:
            if delete:
                done = self.writer.delete(data.select(["id", "p"]))
                change: Callable[[], None] = lambda: self.model.delete(rows, has_ordering=False)  # noqa: E731
            else:
                done = self.writer.upsert(data)
                change = lambda: self.model.upsert(rows)  # noqa: E731
        except CommitConflict:
            _event("second writer: conflict")
            self._sync(None, None)
            return
        _event("second writer")
        self._sync(done.time, change)

    # -- table services -------------------------------------------------------------------------
    def _is_mor(self) -> bool:
        return self.cfg is not None and self.cfg.table_type == "merge_on_read"

    @precondition(lambda self: self._is_mor())
    @rule()
    def schedule_compaction(self) -> None:
        planned = self.table.maintenance.schedule_compaction()
        _event("compaction scheduled" if planned else "compaction: nothing to schedule")
        self._sync(None, None)

    @precondition(lambda self: self._is_mor())
    @rule()
    def compact(self) -> None:
        """Execute the pending plans, or plan and execute one."""
        ran = self.table.maintenance.run_compaction()
        if not ran:
            now = self.table.maintenance.compact()
            ran = [now.time] if now is not None else []
        _event("compacted" if ran else "compaction: nothing to do")
        self._sync(None, None)

    @precondition(lambda self: self._is_mor())
    @rule()
    def compact_everything(self) -> None:
        """Compact until nothing is left to fold: afterwards no file slice has logs and the
        read-optimized view is the snapshot."""
        for _ in range(10):
            ran = self.table.maintenance.run_compaction()
            now = self.table.maintenance.compact()
            if not ran and now is None:
                break
        self._sync(None, None)
        slices = self.table.snapshot().merge_on_read_slices() or []
        with_logs = [sl.group for sl in slices if sl.logs]
        assert not with_logs, f"compaction left logs in file groups {with_logs}"
        self._check_read_optimized(exact=True)

    @rule(policy=st.sampled_from(["KEEP_LATEST_COMMITS", "KEEP_LATEST_FILE_VERSIONS"]))
    def clean(self, policy: str) -> None:
        retained = 3 if policy == "KEEP_LATEST_COMMITS" else 2
        done = self.table.maintenance.clean(policy=policy, retained=retained)
        if done is not None:
            self.cleaned = True
        _event("cleaned" if done is not None else "clean: nothing to do")
        self._sync(None, None)

    @rule()
    def archive(self) -> None:
        result = Archiver(self.table, ARCHIVAL).run()
        _event("archived" if result.archived else "archive: nothing to do")
        self._sync(None, None)

    @rule()
    def cluster(self) -> None:
        done = self.table.maintenance.cluster()
        _event("clustered" if done is not None else "cluster: nothing to do")
        self._sync(None if done is None else done.time, self.model.unchanged)

    @precondition(lambda self: self.cfg is not None and self.cfg.record_index)
    @rule()
    def index(self) -> None:
        build_index(self.table)
        _event("index built")
        self._sync(None, None)

    @precondition(lambda self: len(self.times) > 1)
    @rule()
    def rollback_last(self) -> None:
        """Roll back the newest completed write (never the creation commit)."""
        last = self.times[-1]
        try:
            self.table.maintenance.rollback(last)
        except InstantNotFound:
            # Only an instant still on the active timeline can be rolled back (as in Hudi):
            # after rollbacks, the newest remaining write may have been archived.
            active = {i.time for i in self.table.timeline().instants}
            assert last not in active, f"rollback of active {last} refused as not found"
            _event("rollback refused: archived")
            return
        except PlanError as e:
            # The snapshot before it lost files to a clean: bringing it back would make the
            # table unreadable, so the rollback is refused and the table stays as it is.
            assert "a clean deleted" in str(e), e
            _event("rollback refused: cleaned")
            return
        _event("rolled back")
        self.times.pop()
        self.model.states.pop()
        st_ = self.table.state()
        assert last not in st_.writes, f"{last} still live after its rollback"
        self.last_seq = st_.writes[self.times[-1]].seq
        self._sync(None, None)

    # -- reopening ------------------------------------------------------------------------------
    @rule()
    def reopen(self) -> None:
        """A fresh Table object from the store (nothing cached from this one)."""
        self.table = Table.open(self.table.store, self.settings)
        self.writer = None
        _event("reopened")
        self._sync(None, None)

    @precondition(lambda self: self.since_process >= 12)
    @rule()
    def fresh_process(self) -> None:
        """Another process reads the snapshot (only every dozen steps: it costs a second)."""
        self.since_process = 0
        assert self.store is not None
        env = {**os.environ, "FLOWLEDGER_LIFE_STORE": json.dumps(self.factory.spec(self.store))}
        out = subprocess.run(
            [sys.executable, "-m", "tests.support.life_reader"],
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
        assert out.returncode == 0, out.stderr[-3000:]
        got = json.loads(out.stdout.strip().splitlines()[-1])
        FIGURES["fresh process reads"] += 1
        assert got == self._expected(), "a fresh process reads another snapshot"

    # -- invariants -----------------------------------------------------------------------------
    def _expected(self, step: int | None = None) -> list[Row]:
        step = len(self.times) - 1 if step is None else step
        return self.model.snapshot(step, self.times)

    def _check_read_optimized(self, exact: bool) -> None:
        got = table_rows(self.table.read(read_optimized=True))
        if exact or not self._is_mor():
            assert got == self._expected(), "read-optimized view differs from the snapshot"
            return
        # Base files only: each row is a version of a record that some step committed.
        versions = self.model.versions(self.times)
        cols = ("id", "ts", "p", "v", "_flowledger_commit_time")
        invented = [r for r in got if tuple(r[c] for c in cols) not in versions]
        assert not invented, f"read-optimized rows no step committed: {invented[:3]}"

    def _steps_to_check(self) -> list[int]:
        last = len(self.times) - 1
        return sorted({0, last // 2, *range(max(0, last - 3), last + 1)})

    @invariant()
    def reads_match_model(self) -> None:
        if self.cfg is None:
            return
        last = len(self.times) - 1
        assert table_rows(self.table.read()) == self._expected(), "snapshot differs from model"
        self._check_read_optimized(exact=False)
        for step in self._steps_to_check():
            try:
                got = table_rows(self.table.read(as_of=self.times[step]))
            except TimelineError as e:
                if not _cleaned_refusal(e) or (step == last and not waived("latest-cleaned")):
                    raise
                _event("time travel: refused, files cleaned")
                FIGURES["time travel refused (cleaned)"] += 1
                continue
            assert got == self._expected(step), f"time travel to step {step} of {last}"
        for begin in sorted({0, last // 2, max(0, last - 2), max(0, last - 1)}):
            self._check_changes(begin, last)
        _assert_checked(check_table(self.table))

    def _check_changes(self, begin: int, end: int) -> None:
        """Incremental and CDC reads of (begin, end]; a refused range is read again from the
        earliest instant the refusal names, which must then be readable."""
        for cdc in (False, True):
            what = "cdc" if cdc else "incremental"
            start = begin
            try:
                got = self._changes(start, end, cdc)
            except RangeNotReadable as e:
                _event(f"{what}: range not readable")
                FIGURES[f"{what} refused"] += 1
                assert e.earliest, f"{what} refusal names no earliest instant: {e}"
                if e.earliest not in self.times or self.times.index(e.earliest) >= end:
                    continue
                start = self.times.index(e.earliest)
                assert start > begin, f"{what} ({begin}, {end}] refused, earliest is {start}"
                got = self._changes(start, end, cdc)
                FIGURES[f"{what} read from earliest"] += 1
            if cdc:
                expected: Any = self.model.cdc(start, end, self.times)
            else:
                expected = self.model.incremental(start, end, self.times)
            assert got == expected, f"{what} ({start}, {end}]"

    def _changes(self, begin: int, end: int, cdc: bool) -> Any:
        data = self.table.changes(self.times[begin], self.times[end], cdc=cdc)
        return cdc_rows(data) if cdc else table_rows(data)


def _assert_checked(result: Any) -> None:
    """The table check passes: a falsy problem list, or a report whose `ok` is true."""
    ok = getattr(result, "ok", None)
    if ok is not None:
        assert ok, f"table check: {result}"
    elif isinstance(result, (list, tuple)):
        assert not result, f"table check: {result}"


def machine(factory: StoreFactory, table_type: str) -> type[KeyedLife]:
    """A state machine class for one table type on one kind of store (its configurations
    print with their real table type when a failure is replayed)."""
    mor = table_type == "merge_on_read"
    configs = CONFIGS.map(
        lambda c: replace(
            c, table_type=table_type, compaction_mode=c.compaction_mode if mor else "off"
        )
    )

    class Life(KeyedLife):
        @initialize(cfg=configs)
        def create(self, cfg: LifeConfig) -> None:
            self.create_table(cfg)

    Life.__name__ = Life.__qualname__ = f"KeyedLife_{table_type}"
    Life.factory = factory
    Life.table_type = table_type
    return Life
