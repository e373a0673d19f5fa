"""The merge-on-read benchmark's flowledger worker, one process per table type, run by
`bench/merge_on_read.py`:

    python -m bench.mor_systems SYSTEM INPUTS_JSON OUT_JSON

SYSTEM is `flowledger-cow` (copy-on-write) or `flowledger-mor` (merge-on-read); the table is
`s3://SYSTEM/t`, reached through the standard AWS variables (the orchestrator points them at its
counting proxy). Public API only (`timeline.Table`, `timeline.keyed`): record key `id`, ordering
field `ts` with event-time merging (what Hudi does with a precombine field), partition `part`.
Merge-on-read compaction is off during the delta commits (Hudi's inline compaction off) and run
once, explicitly and timed, after the last one.

Steps: `load` (one commit per load batch), `upsert_01` .. `upsert_NN` (copy-on-write stops
after the first: its upserts are the baseline, its reads have nothing to merge), after each
delta commit count in `reads_at` a snapshot read `snapshot_N` and a read-optimized read
`read_optimized_N` (merge-on-read only; copy-on-write reads once, `snapshot_1`), then
`compaction` and a snapshot read after it, `snapshot_compacted`. A read is a full scan of every
column by a fresh `Table` object (as a new reader process does), with its row count and the
sum of `qty` as the checksum.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench.mor_data import MorInputs
from bench.upsert_probe import Recorder

#: Carries `--bloom-fpp` from the driver to the flowledger workers.
BLOOM_FPP_ENV = "FLOWLEDGER_BENCH_BLOOM_FPP"

KINDS = {"flowledger-cow": "copy_on_write", "flowledger-mor": "merge_on_read"}


class Flowledger:
    def __init__(self, system: str) -> None:
        from storage import StoreSettings, open_store
        from timeline import Table, TableSettings
        from timeline.keyed import KeyedProperties, MergeMode

        self.store = open_store(f"s3://{system}/t", StoreSettings())
        fpp = os.environ.get(BLOOM_FPP_ENV)  # merge_on_read.py --bloom-fpp
        extra = {"bloom_index_fpp": float(fpp)} if fpp else {}
        self.settings = TableSettings(compaction_mode="off", **extra)
        self.Table = Table
        self.props = KeyedProperties.of(
            "id",
            ordering_field="ts",
            partition_by="part",
            merge_mode=MergeMode.EVENT_TIME,
            table_type=KINDS[system],
        )
        self.table: Any = None

    def load(self, first: pa.Table) -> None:
        self.table = self.Table.create(self.store, self.props, self.settings)
        self.table.insert(first)

    def insert(self, data: pa.Table) -> None:
        self.table.insert(data)

    def upsert(self, data: pa.Table) -> dict[str, Any]:
        done = self.table.upsert(data)
        return {"instant": done.time, "action": done.action}

    def read(self, read_optimized: bool) -> dict[str, Any]:
        reader = self.Table.open(self.store, self.settings)
        data = reader.read(read_optimized=read_optimized)
        return {"rows": data.num_rows, "qty_sum": int(pc.sum(data.column("qty")).as_py() or 0)}

    def compact(self) -> dict[str, Any]:
        done = self.table.maintenance.compact()
        if done is None:
            return {"file_groups": 0, "rows": 0, "bytes_written": 0}
        return {"instant": done.time}

    def describe_compaction(self, instant: str) -> dict[str, Any]:
        """What the compaction commit recorded (read after the clock stopped)."""
        e = self.table.entry(instant)
        stats = e.metadata.get("write_stats", ())
        return {
            "file_groups": len(e.added),
            "rows": sum(f.rows for f in e.added),
            "bytes_written": sum(f.size for f in e.added),
            "log_bytes": sum(int(s.get("log_bytes", 0)) for s in stats),
        }


def run(system: str, inputs: MorInputs, rec: Recorder) -> None:
    fl = Flowledger(system)
    mor = system == "flowledger-mor"
    with rec.step("load") as extra:
        # `seconds` leaves out reading each local input file between the commits.
        t0 = time.perf_counter()
        fl.load(pq.read_table(inputs.loads[0].path))
        spent = time.perf_counter() - t0
        for step in inputs.loads[1:]:
            data = pq.read_table(step.path)
            t0 = time.perf_counter()
            fl.insert(data)
            spent += time.perf_counter() - t0
        extra["seconds"] = spent
    upserts = inputs.upserts if mor else inputs.upserts[:1]
    for i, step in enumerate(upserts, start=1):
        data = pq.read_table(step.path)
        with rec.step(step.name) as extra:
            extra.update(fl.upsert(data))
        if i not in inputs.reads_at:
            continue
        with rec.step(f"snapshot_{i}") as extra:
            extra.update(fl.read(read_optimized=False))
        if mor:
            with rec.step(f"read_optimized_{i}") as extra:
                extra.update(fl.read(read_optimized=True))
    if not mor:
        return
    with rec.step("compaction") as extra:
        extra.update(fl.compact())
    done = rec.result["steps"][-1]
    if done.get("instant") and not done.get("error"):
        rec.annotate(fl.describe_compaction(done["instant"]))
    with rec.step("snapshot_compacted") as extra:
        extra.update(fl.read(read_optimized=False))


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    system, inputs_json, out_json = args
    if system not in KINDS:
        sys.exit(f"unknown system {system}; known: {sorted(KINDS)}")
    rec = Recorder(system, Path(out_json))
    from importlib.metadata import PackageNotFoundError, version

    with contextlib.suppress(PackageNotFoundError):
        rec.result["info"] = {"flowledger": version("flowledger")}
    rec.result["info"]["merge mode"] = "event_time (ordering field ts)"
    run(system, MorInputs.load(Path(inputs_json)), rec)


if __name__ == "__main__":
    main()
