"""The merge-on-read benchmark end to end at a tiny size, flowledger's two table types only
(Hudi needs its own Spark environment): every step runs without error, every snapshot read
returns the expected rows and `qty` checksum, and the figures land in the JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from bench import merge_on_read
from bench.mor_data import generate
from bench.upsert_data import Workload
from bench.upsert_data import generate as upsert_generate


@pytest.mark.unit
def test_inputs_start_from_the_upsert_benchmarks_table_and_first_upsert(tmp_path: Path) -> None:
    w = Workload(rows=3_000, batch=300, delete=100, partitions=4, load_batches=3)
    mor = generate(w, tmp_path / "mor", reads_at=(1, 3))
    upsert = upsert_generate(w, tmp_path / "upsert")
    for a, b in zip(mor.loads, upsert.loads, strict=True):
        assert pq.read_table(a.path).equals(pq.read_table(b.path))
    assert pq.read_table(mor.upserts[0].path).equals(pq.read_table(upsert.steps[0].path))
    assert len(mor.upserts) == 3
    # 240 updates and 60 new keys per upsert
    assert [mor.expected[k].rows for k in ("1", "3")] == [3_060, 3_180]


@pytest.mark.minio
def test_quick_run_of_both_flowledger_table_types(tmp_path: Path) -> None:
    out = tmp_path / "mor.json"
    merge_on_read.main(
        ["--rows", "4000", "--batch", "400", "--partitions", "4", "--load-batches", "2",
         "--reads-at", "1,3", "--systems", "flowledger-cow,flowledger-mor",
         "--workdir", str(tmp_path / "work"), "--json", str(out)]
    )  # fmt: skip
    raw = json.loads(out.read_text())
    expected = raw["inputs"]["expected"]
    results = {r["system"]: r for r in raw["results"]}
    assert set(results) == {"flowledger-cow", "flowledger-mor"}
    for r in results.values():
        assert r["unavailable"] is None
        assert not [s for s in r["steps"].values() if s["error"]], r["steps"]
    cow, mor = results["flowledger-cow"]["steps"], results["flowledger-mor"]["steps"]
    assert set(cow) == {"load", "upsert_01", "snapshot_1"}
    assert set(mor) >= {"upsert_03", "read_optimized_3", "compaction", "snapshot_compacted"}

    def read(step: dict[str, object]) -> dict[str, object]:
        extra = step["extra"]
        assert isinstance(extra, dict)
        return {"rows": extra["rows"], "qty_sum": extra["qty_sum"]}

    assert read(cow["snapshot_1"]) == expected["1"]
    assert read(mor["snapshot_1"]) == expected["1"]
    assert read(mor["snapshot_3"]) == expected["3"]
    assert read(mor["snapshot_compacted"]) == expected["3"]
    # The read-optimized read sees the base files only: the logs' updates are not in it.
    assert read(mor["read_optimized_3"]) != expected["3"]
    # Requests were counted through the proxy; the compaction rewrote the groups with logs.
    assert mor["upsert_01"]["requests"]["by_kind"]["PUT"] > 0
    assert 0 < mor["compaction"]["extra"]["rows"] <= expected["3"]["rows"]
    assert mor["compaction"]["extra"]["file_groups"] > 0
