"""Provenance ingest and rollover under faults, against a real MinIO behind a fault-injecting
proxy, and a MinIO SIGKILLed right after it acknowledged an ingest's manifest: a landed ingest
is reported as landed, a transient fault never deletes what a committed manifest names, every
acknowledged event is there exactly once, and the repository stays readable
(docs/faults.md)."""

from __future__ import annotations

import contextlib
import json
import random
from pathlib import Path

import pytest

from provenance import ProvenanceRepository, ProvenanceSettings
from provenance.records import to_table
from storage import FlowledgerBaseError, UnknownOutcomeError, open_store
from tests.support.crash_minio import CrashingMinio
from tests.support.fault_proxy import Fault, FaultProxy
from tests.support.faults import cli, once, through
from tests.support.provenance_events import ev
from tests.support.servers import S3Endpoint

pytestmark = [pytest.mark.faults, pytest.mark.timeout(240)]


def _events(path: Path, first: int, n: int) -> Path:
    with path.open("w") as fh:
        for i in range(first, first + n):
            fh.write(
                json.dumps(
                    {
                        "event_type": "RECEIVE",
                        "flowfile_uuid": f"00000000-0000-0000-0000-{i:012d}",
                        "component_id": "c1",
                        "component_type": "GetFile",
                        "transit_uri": "file:///in",
                        "event_time": 1_700_000_000_000 + i,
                        "details": f"n{i}",
                        "file_size": 100 + i,
                    }
                )
                + "\n"
            )
    return path


def _manifest(method: str, path: str) -> bool:
    return path.split("?")[0].endswith(".staged.json")


def _counts(endpoint: S3Endpoint, tmp_path: Path, uri: str) -> list[tuple[str, int]]:
    """(details, how many events carry it), read with the CLI straight from MinIO."""
    res = cli(
        endpoint,
        tmp_path,
        "provenance",
        "sql",
        "SELECT details, count(*) AS n FROM provenance GROUP BY details ORDER BY details",
        "--json",
        "--repo",
        uri,
    )
    assert res.returncode == 0, res.stderr
    return [(r["details"], r["n"]) for r in json.loads(res.stdout)]


def _ingest(endpoint: S3Endpoint, tmp_path: Path, uri: str, f: Path, **env: str) -> object:
    return cli(endpoint, tmp_path, "provenance", "ingest", str(f), "--repo", uri, **env)


def test_ingest_whose_manifest_put_landed_before_a_refusal_reports_success(
    minio: S3Endpoint, proxy: FaultProxy, tmp_path: Path
) -> None:
    uri = f"s3://{minio.new_bucket()}/repo"
    ep = through(minio, proxy)
    proxy.rule = once(lambda m, p: m == "PUT" and _manifest(m, p), Fault.drop(refuse=3))
    res = _ingest(ep, tmp_path, uri, _events(tmp_path / "a.jsonl", 0, 300))
    assert any(a == "drop" for _, _, a in proxy.seen)
    assert res.returncode == 0, res.stderr  # type: ignore[attr-defined]
    assert "registered 300 events" in res.stdout  # type: ignore[attr-defined]
    assert _counts(minio, tmp_path, uri) == [(f"n{i}", 1) for i in sorted(range(300), key=str)]


def test_failed_read_back_of_a_committed_manifest_never_deletes_its_parts(
    minio: S3Endpoint, proxy: FaultProxy, tmp_path: Path
) -> None:
    """The manifest landed and was acknowledged; reading it back then failed (its GET
    dropped three times). The failure path used to delete the committed ingest's parts:
    every later read of the repository failed, permanently."""
    uri = f"s3://{minio.new_bucket()}/repo"
    ep = through(minio, proxy)
    assert _ingest(ep, tmp_path, uri, _events(tmp_path / "a.jsonl", 0, 50)).returncode == 0  # type: ignore[attr-defined]
    ours = "/journals/00000000000000000250-00000000000000000050.staged.json"
    proxy.rule = once(lambda m, p: m == "GET" and p.endswith(ours), Fault.drop(), times=3)
    res = _ingest(ep, tmp_path, uri, _events(tmp_path / "b.jsonl", 50, 200))
    proxy.rule = lambda m, p: Fault.forward()
    # Readable first (this is what the deleted parts broke), then reported as it happened.
    expected = [(f"n{i}", 1) for i in sorted(range(250), key=str)]
    assert _counts(minio, tmp_path, uri) == expected
    assert res.returncode == 0, res.stderr  # type: ignore[attr-defined]
    # Rollover merges it, and the next ingest works.
    roll = cli(minio, tmp_path, "provenance", "rollover", "--repo", uri)
    assert roll.returncode == 0, roll.stderr
    assert _ingest(minio, tmp_path, uri, _events(tmp_path / "c.jsonl", 250, 5)).returncode == 0  # type: ignore[attr-defined]
    assert len(_counts(minio, tmp_path, uri)) == 255


def test_ingest_whose_manifest_outcome_cannot_be_learned_exits_3_and_keeps_its_parts(
    minio: S3Endpoint, proxy: FaultProxy, tmp_path: Path
) -> None:
    uri = f"s3://{minio.new_bucket()}/repo"
    ep = through(minio, proxy)
    proxy.rule = once(lambda m, p: m == "PUT" and _manifest(m, p), Fault.drop(refuse=8))
    res = _ingest(
        ep, tmp_path, uri, _events(tmp_path / "a.jsonl", 0, 100), FLOWLEDGER_READ_BACK_TIMEOUT="1"
    )
    assert res.returncode == 3, res.stderr  # type: ignore[attr-defined]
    line = res.stderr.strip()  # type: ignore[attr-defined]
    assert line.startswith("flowledger: error: unknown outcome: ") and "\n" not in line
    assert "provenance events --first" in line and "cannot reach" not in line
    # It landed, and nothing it names was deleted: every event is readable, once.
    assert _counts(minio, tmp_path, uri) == [(f"n{i}", 1) for i in sorted(range(100), key=str)]


def test_rollover_and_ingests_on_a_flaky_network_keep_every_event_exactly_once(
    minio: S3Endpoint, proxy: FaultProxy, tmp_path: Path
) -> None:
    """Staged ingests (all or nothing: a failed one must not land) and journal flushes (a
    failed flush stays buffered and is written again by the next flush), rollovers between
    them, one write answer in seven lost and one request in twenty reset."""
    uri = f"s3://{minio.new_bucket()}/repo"
    settings = ProvenanceSettings(cache_dir=str(tmp_path / "cache"), journal_max_events=40)
    store = open_store(uri, through(minio, proxy).settings(read_back_timeout=5))
    store.capabilities()
    rnd = random.Random(11)

    def flaky(method: str, path: str) -> Fault:
        r = rnd.random()
        if method in ("PUT", "POST", "DELETE") and r < 0.15:
            return Fault.drop(refuse=rnd.choice([0, 0, 1]))
        if r < 0.2:
            return Fault.reset()
        return Fault.forward()

    proxy.rule = flaky
    acked: set[str] = set()
    failed: set[str] = set()  # staged ingests reported as failed (not unknown)
    for batch in range(10):
        name = f"b{batch}"
        events = [ev(1000 * batch + i, details=name) for i in range(60)]
        try:
            repo = ProvenanceRepository.open(store, settings, background=False)
        except FlowledgerBaseError:
            continue
        try:
            if batch % 2:
                repo.register_events(events, sync=True)
            else:
                repo.register_staged([to_table(events, settings.max_attribute_length)])
            acked.add(name)
            if batch % 3 == 2:
                repo.rollover()
        except UnknownOutcomeError:
            pass
        except FlowledgerBaseError:
            if batch % 2 == 0 and name not in acked:
                failed.add(name)
        finally:
            with contextlib.suppress(FlowledgerBaseError):
                repo.close()
    proxy.rule = lambda m, p: Fault.forward()
    assert any(a == "drop" for _, _, a in proxy.seen)
    direct = ProvenanceRepository.open(open_store(uri, minio.settings()), settings)
    direct.rollover()
    _, rows = direct.sql("SELECT details, count(*) FROM provenance GROUP BY details")
    found = dict(rows)
    _, ids = direct.sql("SELECT count(*), count(DISTINCT event_id) FROM provenance")
    direct.close()
    assert ids[0][0] == ids[0][1]  # no id twice
    assert all(n == 60 for n in found.values()), found  # never partly, never twice
    assert acked <= set(found), (acked, found)
    assert not (failed & set(found)), (failed, found)


def test_minio_killed_right_after_acknowledging_the_manifest(tmp_path: Path) -> None:
    """SIGKILL of MinIO just after it acknowledged the ingest's manifest, restart 2 s later on
    the same data folder: the ingest landed and says so; all its events are visible once."""
    server = CrashingMinio(tmp_path / "minio")
    try:
        ep = server.endpoint
        uri = f"s3://{server.endpoint.new_bucket()}/repo"
        restarted = []

        def crash() -> None:
            restarted.append(server.crash_for(2.0))

        server.proxy.rule = once(
            lambda m, p: m == "PUT" and _manifest(m, p), Fault(on_answer=crash)
        )
        res = _ingest(ep, tmp_path, uri, _events(tmp_path / "a.jsonl", 0, 500))
        assert server.kills == 1
        restarted[0].join(60)
        assert res.returncode == 0, res.stderr  # type: ignore[attr-defined]
        got = _counts(server.direct, tmp_path, uri)
        assert got == [(f"n{i}", 1) for i in sorted(range(500), key=str)]
    finally:
        server.stop()
