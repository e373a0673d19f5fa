"""The upsert benchmark end to end at a tiny size: flowledger beside delta-rs on one MinIO,
through the shared side-by-side harness (workers, counting proxies, the report)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import upsert


@pytest.mark.minio
def test_quick_run_of_flowledger_beside_delta_rs(tmp_path: Path) -> None:
    out = tmp_path / "upsert.json"
    upsert.main(
        ["--rows", "4000", "--batch", "400", "--delete", "100", "--partitions", "4",
         "--load-batches", "2", "--systems", "flowledger,delta",
         "--workdir", str(tmp_path / "work"), "--json", str(out)]
    )  # fmt: skip
    raw = json.loads(out.read_text())
    results = {r["system"]: r for r in raw["results"]}
    assert set(results) == {"flowledger", "delta"}
    for r in results.values():
        assert r["unavailable"] is None
        steps = r["steps"]
        assert not [s for s in steps.values() if s["error"]], steps
        assert {"load", "upsert_random", "upsert_clustered", "delete", "append"} <= set(steps)
        # Each step's requests were counted through the system's own proxy.
        assert steps["upsert_random"]["requests"]["by_kind"]["PUT"] > 0
        # Both systems end with the same number of rows: the inputs' expectation.
        assert steps["count"]["extra"]["rows"] == raw["expected_rows"]
