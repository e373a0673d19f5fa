"""Table writes and archival under faults, against a real MinIO behind a fault-injecting proxy:
every acknowledged commit is there exactly once, a write reported as failed did not land, an
unknown outcome says so (exit 3) and is settled by reading the timeline, and the table stays
readable (docs/faults.md)."""

from __future__ import annotations

import json
import random
import threading
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from storage import FlowledgerBaseError, UnknownOutcomeError, open_store
from tests.support.crash_minio import CrashingMinio
from tests.support.fault_proxy import DROP, FORWARD, Fault, FaultProxy
from tests.support.faults import cli, once, through
from tests.support.servers import S3Endpoint
from timeline import Table, TableSettings
from timeline.archive import (
    ArchivalSettings,
    ArchivedTimeline,
    Archiver,
    combined_timeline,
    read_manifest,
)
from timeline.instant import WRITE_ACTIONS

pytestmark = [pytest.mark.faults, pytest.mark.timeout(180)]


def _log_put(method: str, path: str) -> bool:
    return method == "PUT" and "/_timeline/log/" in path


def _parquet(tmp_path: Path, batch: int, rows: int = 50) -> Path:
    f = tmp_path / f"batch{batch}.parquet"
    pq.write_table(pa.table({"batch": [batch] * rows, "x": list(range(rows))}), f)
    return f


def _batches(minio: S3Endpoint, uri: str) -> Counter[int]:
    """Rows per batch in the table's snapshot, read straight from MinIO (past the proxy)."""
    table = Table.open(open_store(uri, minio.settings()))
    data = table.read()
    return Counter(data.column("batch").to_pylist()) if data.num_rows else Counter()


def test_cli_write_whose_log_put_landed_before_a_refusal_reports_the_commit(
    minio: S3Endpoint, proxy: FaultProxy, tmp_path: Path
) -> None:
    """The commit-log PUT reaches MinIO, its answer is lost, the endpoint refuses for 3 s: the
    write used to exit 1 with "cannot reach S3 endpoint" although it had completed."""
    uri = f"s3://{minio.new_bucket()}/tables/t"
    ep = through(minio, proxy)
    assert cli(ep, tmp_path, "table", "write", uri, str(_parquet(tmp_path, 1))).returncode == 0
    proxy.rule = once(_log_put, Fault.drop(refuse=3))
    res = cli(ep, tmp_path, "table", "write", uri, str(_parquet(tmp_path, 2)), "--json")
    assert any(a == "drop" for _, _, a in proxy.seen)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["state"] == "completed"
    assert _batches(minio, uri) == {1: 50, 2: 50}


def test_cli_write_whose_outcome_cannot_be_learned_exits_3_and_says_what_to_check(
    minio: S3Endpoint, proxy: FaultProxy, tmp_path: Path
) -> None:
    uri = f"s3://{minio.new_bucket()}/tables/t"
    ep = through(minio, proxy)
    proxy.rule = once(_log_put, Fault.drop(refuse=8))
    res = cli(
        ep,
        tmp_path,
        "table",
        "write",
        uri,
        str(_parquet(tmp_path, 1)),
        FLOWLEDGER_READ_BACK_TIMEOUT="1",
    )
    assert res.returncode == 3, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr
    assert lines[0].startswith("flowledger: error: unknown outcome: ")
    assert "cannot reach" not in lines[0] and "may or may not have completed" in lines[0]
    assert "timeline" in lines[0]  # what to check
    # It did land: once the endpoint answers, the timeline tells, and the rows are there once.
    assert _batches(minio, uri) == {1: 50}
    shown = cli(minio, tmp_path, "timeline", "show", "--table", uri, "--json")
    assert shown.returncode == 0, shown.stderr
    assert [i["state"] for i in json.loads(shown.stdout)] == ["completed"]


def test_flaky_network_every_acknowledged_commit_is_there_exactly_once(
    minio: S3Endpoint, proxy: FaultProxy
) -> None:
    """One answer in five lost at random (some followed by a refusal), resets and delays,
    on every request of twelve writes."""
    uri = f"s3://{minio.new_bucket()}/tables/t"
    rnd = random.Random(7)

    def flaky(method: str, path: str) -> Fault:
        r = rnd.random()
        if method == "PUT" and r < 0.2:
            return Fault.drop(refuse=rnd.choice([0, 0, 1]))
        if r < 0.25:
            return Fault.reset()
        if r < 0.3:
            return Fault.forward(delay=0.1)
        return Fault.forward()

    settings = through(minio, proxy).settings(read_back_timeout=5)
    store = open_store(uri, settings)
    store.capabilities()
    proxy.rule = flaky
    acked, failed, unknown = set(), set(), set()
    for batch in range(12):
        data = pa.table({"batch": [batch] * 10, "x": list(range(10))})
        try:
            Table.open(store, TableSettings()).write(data)
            acked.add(batch)
        except UnknownOutcomeError:
            unknown.add(batch)
        except FlowledgerBaseError:
            failed.add(batch)
    proxy.rule = lambda m, p: Fault.forward()
    assert any(a == "drop" for _, _, a in proxy.seen)
    found = _batches(minio, uri)
    print(f"acknowledged {sorted(acked)}, failed {sorted(failed)}, unknown {sorted(unknown)}")
    assert all(n == 10 for n in found.values()), found  # never twice, never partly
    assert acked <= set(found), (acked, found)
    assert not (failed & set(found)), (failed, found)
    assert set(found) <= acked | unknown
    Table.open(open_store(uri, minio.settings())).maintenance.recover()  # readable, and recoverable
    assert _batches(minio, uri) == found


def test_archival_with_lost_answers_keeps_every_instant_exactly_once(
    minio: S3Endpoint, proxy: FaultProxy
) -> None:
    uri = f"s3://{minio.new_bucket()}/tables/t"
    direct = open_store(uri, minio.settings())
    table = Table.open(direct)
    commits = [
        table.write(pa.table({"batch": [b] * 5, "x": list(range(5))})).time for b in range(8)
    ]
    faulty = open_store(uri, through(minio, proxy).settings(read_back_timeout=5))
    faulty.capabilities()
    writes, drops = [0], [0]

    def rule(method: str, path: str) -> Fault:
        if method in ("PUT", "POST", "DELETE"):
            writes[0] += 1
            if writes[0] % 3 == 0 and drops[0] < 4:
                drops[0] += 1
                return Fault.drop(refuse=drops[0] % 2)
        return Fault.forward()

    proxy.rule = rule
    settings = ArchivalSettings(keep_min_commits=2, keep_max_commits=3, archive_lease_ms=0)
    for _ in range(4):  # a run that failed half-way is finished by the next one
        try:
            Archiver(Table.open(faulty), settings).run(sweep=True)
            break
        except FlowledgerBaseError:
            continue
    proxy.rule = lambda m, p: Fault.forward()
    assert drops[0] > 0
    reread = Table.open(open_store(uri, minio.settings()))
    Archiver(reread, settings).run(sweep=True)
    assert read_manifest(reread.store).pending is None
    combined = combined_timeline(reread)
    seen = Counter((i.time, i.action) for i in combined)
    assert set(seen.values()) == {1}, seen
    assert [i.time for i in combined.completed() if i.action in WRITE_ACTIONS] == commits
    assert len(ArchivedTimeline(reread.store).records()) == sum(
        f.count for f in read_manifest(reread.store).files
    )
    assert _batches(minio, uri) == {b: 5 for b in range(8)}


@pytest.mark.parametrize("when", ["after-answer", "before-answer"])
def test_cli_write_with_minio_killed_at_the_commit_point(when: str, tmp_path: Path) -> None:
    """MinIO is SIGKILLed right after it applied the commit-log PUT, once the client got the
    answer, or before (the client sees a dropped connection, then refusals), and restarted
    2 s later on the same data folder: the write reports the commit, which is there once."""
    server = CrashingMinio(tmp_path / "minio")
    try:
        uri = f"s3://{server.endpoint.new_bucket()}/tables/t"
        ep = server.endpoint
        assert cli(ep, tmp_path, "table", "write", uri, str(_parquet(tmp_path, 1))).returncode == 0
        restarted: list[threading.Thread] = []

        def crash() -> None:
            restarted.append(server.crash_for(2.0))

        kind = FORWARD if when == "after-answer" else DROP
        server.proxy.rule = once(_log_put, Fault(kind, on_answer=crash))
        res = cli(ep, tmp_path, "table", "write", uri, str(_parquet(tmp_path, 2)), "--json")
        assert server.kills == 1
        restarted[0].join(60)
        assert server.same_port
        assert res.returncode == 0, res.stderr
        assert json.loads(res.stdout)["state"] == "completed"
        assert _batches(server.direct, uri) == {1: 50, 2: 50}
    finally:
        server.stop()
