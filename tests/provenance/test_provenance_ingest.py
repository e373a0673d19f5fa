"""`provenance ingest` integrity: strict types (line and field named), all or nothing,
streaming through a staged commit, re-ingest detected, NiFi fields kept, concurrent ingests,
dicts accepted through the same validation."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from provenance import IngestError, InvalidEvent, ProvenanceRepository, ProvenanceSettings
from provenance.crash import ENV
from provenance.ingest import ingest_file, read_events
from storage import open_store
from tests.support.backends import Backend
from tests.support.paths import REPO_ROOT

ROOT = REPO_ROOT
NIFI_ID = "5d0b2b5e-7c1a-4e0e-9b8c-2f7d3b6c{:04d}"


def ours(i: int, **over: Any) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "event_type": "SEND",
        "flowfile_uuid": f"ff-{i}",
        "component_id": "put",
        "component_type": "PutS3Object",
        "file_size": i,
        "transit_uri": "s3://b/k",
        "event_time": 1_700_000_000_000 + i,
        "updated_attributes": {"filename": f"f{i}"},
    }
    rec.update(over)
    return rec


def nifi(i: int) -> dict[str, Any]:
    return {
        "eventId": NIFI_ID.format(i),
        "eventOrdinal": i,
        "eventType": "RECEIVE",
        "timestampMillis": 1_700_000_000_000 + i,
        "timestamp": "2023-11-14T22:13:20.000Z",
        "durationMillis": 3,
        "componentId": "proc-1",
        "componentType": "GetFile",
        "componentName": "Get the files",
        "processGroupId": "pg-1",
        "processGroupName": "root",
        "entityId": f"ff-{i}",
        "entityType": "org.apache.nifi.flowfile.FlowFile",
        "entitySize": 10,
        "updatedAttributes": {"filename": f"f{i}"},
        "previousAttributes": {},
        "actorHostname": "nifi-host",
        "contentURI": f"http://h/nifi-api/c/{i}",
        "transitUri": "file:/in",
        "platform": "nifi",
        "application": "NiFi Flow",
    }


def lines(records: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


def repo_for(tmp_path: Path, backend: Backend | None = None, **over: Any) -> ProvenanceRepository:
    store = backend.open() if backend else open_store(str(tmp_path / "repo"))
    return ProvenanceRepository.open(
        store, ProvenanceSettings(cache_dir=str(tmp_path / "c"), **over)
    )


def count(repo: ProvenanceRepository) -> int:
    return int(repo.sql("SELECT count(*) FROM provenance")[1][0][0])


# -- types: every field checked, the line and the field named (items 4 and 7) -----------------
@pytest.mark.unit
@pytest.mark.parametrize(
    ("over", "field"),
    [
        ({"file_size": True}, "file_size"),
        ({"file_size": 10**22}, "file_size"),
        ({"file_size": "12"}, "file_size"),
        ({"event_duration_ms": 2**63}, "event_duration_ms"),
        ({"updated_attributes": {"n": 1}}, "updated_attributes"),
        ({"previous_attributes": ["a"]}, "previous_attributes"),
        ({"parent_uuids": "abc"}, "parent_uuids"),
        ({"child_uuids": [1, 2]}, "child_uuids"),
        ({"component_id": 7}, "component_id"),
        ({"details": {"x": 1}}, "details"),
        ({"event_time": True}, "event_time"),
        ({"event_time": "yesterday"}, "event_time"),
    ],
)
def test_type_errors_name_line_and_field(over: dict[str, Any], field: str) -> None:
    text = lines([ours(0), ours(1, **over)])
    with pytest.raises(IngestError) as exc:
        list(read_events(io.StringIO(text)))
    msg = str(exc.value)
    assert msg.startswith("line 2: ") and field in msg and "\n" not in msg, msg


@pytest.mark.unit
def test_nifi_export_type_errors_name_nifi_field() -> None:
    bad = nifi(1) | {"entitySize": True}
    with pytest.raises(IngestError, match=r"^record 2: entitySize"):
        list(read_events(io.StringIO(json.dumps([nifi(0), bad]))))
    bad = nifi(1) | {"childIds": "c1"}
    with pytest.raises(IngestError, match=r"^line 2: childIds"):
        list(read_events(io.StringIO(lines([nifi(0), bad]))))


@pytest.mark.unit
def test_string_where_list_expected_is_not_split() -> None:
    text = lines([ours(0, event_type="FORK", parent_uuids="parent", transit_uri=None)])
    with pytest.raises(IngestError, match="parent_uuids"):
        list(read_events(io.StringIO(text)))


# -- the library accepts dicts through the same validation ------------------------------------
@pytest.mark.unit
def test_register_events_accepts_dicts(tmp_path: Path) -> None:
    repo = repo_for(tmp_path)
    ids = repo.register_events([ours(0), ours(1)], sync=True)
    assert len(ids) == 2
    [e] = repo.get_events(ids[1], 1)
    assert (e.flowfile_uuid, e.file_size, e.updated_attributes) == ("ff-1", 1, {"filename": "f1"})
    with pytest.raises(InvalidEvent, match=r"event #1 .*file_size"):
        repo.register_events([ours(2), ours(3, file_size=True)], sync=True)
    with pytest.raises(InvalidEvent, match="unknown_field"):
        repo.register_events([ours(4, unknown_field=1)], sync=True)
    assert count(repo) == 2
    repo.close()


@pytest.mark.unit
def test_nifi_fields_without_a_column_are_kept(tmp_path: Path) -> None:
    src = tmp_path / "nifi.json"
    src.write_text(json.dumps([nifi(0), nifi(1)]))
    repo = repo_for(tmp_path)
    result = ingest_file(repo, src)
    assert result.events == 2
    _names, rows = repo.sql(
        "SELECT source_fields['eventId'], source_fields['componentName'], "
        "source_fields['processGroupId'], source_fields['processGroupName'], "
        "source_fields['actorHostname'], source_fields['contentURI'], "
        "source_fields['platform'], source_fields['application'], details "
        "FROM provenance ORDER BY event_id"
    )
    assert rows[1] == (
        NIFI_ID.format(1),
        "Get the files",
        "pg-1",
        "root",
        "nifi-host",
        "http://h/nifi-api/c/1",
        "nifi",
        "NiFi Flow",
        None,
    )
    repo.close()


# -- all or nothing, streaming, re-ingest ---------------------------------------------------
@pytest.mark.unit
def test_removed_attribute_null_is_kept(tmp_path: Path) -> None:
    src = tmp_path / "e.jsonl"
    src.write_text(lines([ours(0, updated_attributes={"gone": None, "filename": "x"})]))
    repo = repo_for(tmp_path)
    assert ingest_file(repo, src).events == 1
    [e] = repo.get_events(0, 1)
    assert dict(e.updated_attributes) == {"gone": None, "filename": "x"}
    repo.close()


@pytest.mark.unit
def test_bad_last_line_writes_nothing(tmp_path: Path) -> None:
    src = tmp_path / "e.jsonl"
    src.write_text(lines([ours(i) for i in range(250)] + [ours(250, file_size=-1)]))
    repo = repo_for(tmp_path, journal_max_events=40)
    with pytest.raises(IngestError, match=r"^line 251: file_size"):
        ingest_file(repo, src, batch_events=100)
    assert count(repo) == 0 and repo.max_event_id() == -1
    assert list(repo.store.list("")) == []  # not even a staged part
    repo.close()


@pytest.mark.unit
def test_ingest_streams_in_parts_committed_together(tmp_path: Path) -> None:
    src = tmp_path / "e.jsonl"
    src.write_text(lines([ours(i) for i in range(250)]))
    repo = repo_for(tmp_path, journal_max_events=40)
    result = ingest_file(repo, src, batch_events=30)
    assert (result.events, result.first_event_id, result.last_event_id) == (250, 0, 249)
    assert result.parts == 7  # 250 events in parts of journal_max_events=40
    got = repo.get_events(0, 1000)
    assert [e.event_id for e in got] == list(range(250))
    assert [e.flowfile_uuid for e in got] == [f"ff-{i}" for i in range(250)]
    repo.register_events([ours(1000)], sync=True)
    repo.rollover()
    assert repo.snapshot().journals == ()
    assert [k for k in repo.store.list("") if "journals/" in k.key or "staging/" in k.key] == []
    assert count(repo) == 251
    repo.close()


def _crash_mid_ingest(uri: str, cache: str, src: str) -> None:
    os.environ[ENV] = "provenance.ingest.parts_staged"
    repo = ProvenanceRepository.open(open_store(uri), ProvenanceSettings(cache_dir=cache))
    ingest_file(repo, Path(src), batch_events=30)


@pytest.mark.unit
def test_crash_before_commit_leaves_nothing_visible(tmp_path: Path) -> None:
    import multiprocessing

    src = tmp_path / "e.jsonl"
    src.write_text(lines([ours(i) for i in range(100)]))
    uri, cache = str(tmp_path / "repo"), str(tmp_path / "c")
    child = multiprocessing.get_context("spawn").Process(
        target=_crash_mid_ingest, args=(uri, cache, str(src))
    )
    child.start()
    child.join(120)
    assert child.exitcode == -9
    repo = ProvenanceRepository.open(
        open_store(uri), ProvenanceSettings(cache_dir=cache, staging_timeout_s=0)
    )
    assert count(repo) == 0 and repo.snapshot().journals == ()
    assert [i.key for i in repo.store.list("staging/")] == []  # recovery removed the parts
    assert ingest_file(repo, src).events == 100
    repo.close()


def _crash_after_rollover_commit(uri: str, cache: str) -> None:
    os.environ[ENV] = "provenance.rollover.committed"
    s = ProvenanceSettings(cache_dir=cache, rollover_size=1)
    ProvenanceRepository.open(open_store(uri), s, recover=False).rollover()


@pytest.mark.unit
def test_staged_ingest_merged_in_pieces_with_a_crash(tmp_path: Path) -> None:
    import multiprocessing

    from provenance.rollover import rollover_once

    src = tmp_path / "e.jsonl"
    src.write_text(lines([ours(i) for i in range(250)]))
    uri, cache = str(tmp_path / "repo"), str(tmp_path / "c")
    s = ProvenanceSettings(cache_dir=cache, journal_max_events=40, rollover_size=1)
    repo = ProvenanceRepository.open(open_store(uri), s)
    ingest_file(repo, src)
    assert rollover_once(repo.store, repo.table, s) is not None  # the first part only
    assert count(repo) == 250
    assert [e.event_id for e in repo.get_events(0, 1000)] == list(range(250))
    # The next rollover dies after its commit, before deleting the part it merged.
    child = multiprocessing.get_context("spawn").Process(
        target=_crash_after_rollover_commit, args=(uri, cache)
    )
    child.start()
    child.join(120)
    assert child.exitcode == -9
    repo = ProvenanceRepository.open(open_store(uri), s)  # recovery, then the rest is merged
    repo.rollover()
    got = repo.get_events(0, 1000)
    assert [e.event_id for e in got] == list(range(250))
    assert [e.flowfile_uuid for e in got] == [f"ff-{i}" for i in range(250)]
    assert count(repo) == 250 and repo.snapshot().journals == ()
    left = [i.key for i in repo.store.list("") if "journals/" in i.key or "staging/" in i.key]
    assert left == []
    repo.close()


class _InlineSpark:
    """Runs the Spark rollover's tasks in this process (the job's own code, no JVM)."""

    @property
    def sparkContext(self) -> _InlineSpark:
        return self

    def parallelize(self, items: list[Any], _slices: int) -> _InlineSpark:
        self._items = items
        return self

    def map(self, fn: Any) -> _InlineSpark:
        self._items = [fn(x) for x in self._items]
        return self

    def collect(self) -> list[Any]:
        return self._items


@pytest.mark.unit
def test_spark_rollover_engine_merges_staged_parts(tmp_path: Path) -> None:
    src = tmp_path / "e.jsonl"
    src.write_text(lines([ours(i) for i in range(120)]))
    repo = repo_for(tmp_path, journal_max_events=50)
    ingest_file(repo, src)
    result = repo.rollover(engine="spark", spark=_InlineSpark())
    assert (result.events, result.journals) == (120, 3)
    assert [e.event_id for e in repo.get_events(0, 1000)] == list(range(120))
    left = [i.key for i in repo.store.list("") if "journals/" in i.key or "staging/" in i.key]
    assert left == []
    repo.close()


@pytest.mark.unit
def test_reingesting_a_nifi_export_is_refused(tmp_path: Path) -> None:
    first = tmp_path / "a.json"
    first.write_text(json.dumps([nifi(i) for i in range(5)]))
    again = tmp_path / "b.jsonl"
    again.write_text(lines([nifi(i) for i in range(3, 8)]))
    repo = repo_for(tmp_path)
    ingest_file(repo, first)
    with pytest.raises(IngestError, match=r"2 of the 5 events .* already ingested"):
        ingest_file(repo, again)
    repo.rollover()
    with pytest.raises(IngestError, match=r"2 of the 5 events .* already ingested"):
        ingest_file(repo, again)
    assert count(repo) == 5
    twice = tmp_path / "c.jsonl"
    twice.write_text(lines([nifi(10), nifi(11), nifi(10)]))
    with pytest.raises(IngestError, match=r"line 3: .*eventId .* line 1"):
        ingest_file(repo, twice)
    assert count(repo) == 5
    repo.close()


# -- the CLI: one line, non-zero exit, nothing written (items 4 and 7) ------------------------
def _cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "flowledger", "provenance", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", **env},
        timeout=300,
    )


@pytest.mark.unit
def test_cli_type_error_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    env = {"FLOWLEDGER_REPO": str(tmp_path / "repo"), "XDG_CACHE_HOME": str(tmp_path / "c")}
    good = tmp_path / "good.jsonl"
    good.write_text(lines([ours(i) for i in range(3)]))
    assert _cli(["ingest", str(good)], env).returncode == 0
    for i, over in enumerate(
        [{"file_size": True}, {"file_size": 10**22}, {"updated_attributes": {"a": 1}}]
    ):
        bad = tmp_path / f"bad{i}.jsonl"
        bad.write_text(lines([ours(10), ours(11, **over)]))
        p = _cli(["ingest", str(bad)], env)
        assert p.returncode != 0
        assert p.stderr.strip().count("\n") == 0 and "Traceback" not in p.stderr, p.stderr
        assert "line 2" in p.stderr and next(iter(over)) in p.stderr
    p = _cli(["sql", "SELECT count(*) AS n FROM provenance", "--json"], env)
    assert json.loads(p.stdout) == [{"n": 3}]


# -- concurrent ingests while unmerged journals exist ---------------------------------------
@pytest.mark.parametrize(
    "where",
    [pytest.param("local", marks=pytest.mark.unit), pytest.param("moto", marks=pytest.mark.s3)],
)
def test_four_concurrent_ingests_all_succeed(
    where: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path / "c")}
    if where == "local":
        uri = str(tmp_path / "repo")
    else:
        endpoint = request.getfixturevalue("moto")
        uri = f"s3://{endpoint.new_bucket()}/repo"
        env |= {
            "AWS_ENDPOINT_URL": endpoint.endpoint,
            "AWS_ACCESS_KEY_ID": endpoint.access_key,
            "AWS_SECRET_ACCESS_KEY": endpoint.secret_key,
            "AWS_REGION": endpoint.region,
        }
    env["FLOWLEDGER_REPO"] = uri
    seed = tmp_path / "seed.jsonl"
    seed.write_text(lines([ours(i) for i in range(5)]))
    for _ in range(3):  # several unmerged journals: every ingest starts with a rollover
        assert _cli(["ingest", str(seed)], env).returncode == 0
    procs = []
    for n in range(4):
        f = tmp_path / f"in{n}.jsonl"
        f.write_text(lines([ours(100 * (n + 1) + i) for i in range(20)]))
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "flowledger", "provenance", "ingest", str(f)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                cwd=ROOT,
                env={"PATH": "/usr/bin:/bin", **env},
            )
        )
    outcomes = []
    for p in procs:
        with p:  # reads both pipes to the end and closes them
            _, err = p.communicate(timeout=300)
        outcomes.append((p.returncode, err))
    assert [rc for rc, _ in outcomes] == [0, 0, 0, 0], outcomes
    p = _cli(
        ["sql", "SELECT count(*) AS n, count(DISTINCT event_id) AS d FROM provenance", "--json"],
        env,
    )
    assert json.loads(p.stdout) == [{"n": 95, "d": 95}]


@pytest.mark.unit
def test_nifi_json_array_is_decoded_record_by_record() -> None:
    from provenance.ingest import _array_items

    records = [nifi(i) for i in range(5)]
    text = " [\n" + ",\n ".join(json.dumps(r) for r in records) + "\n]\n"
    stream = io.StringIO(text[text.index("[") + 1 :])
    assert list(_array_items(stream, chunk=7)) == records  # chunks smaller than a record
    with pytest.raises(IngestError, match="no closing"):
        list(_array_items(io.StringIO(json.dumps(records[0])), chunk=7))


@pytest.mark.unit
def test_lone_surrogate_names_line_and_field(tmp_path: Path) -> None:
    """`\\ud800` alone is legal JSON but not text: named by line (or record) and field, not
    a bare codec error from the writer; a surrogate pair (an emoji) is accepted."""
    src = tmp_path / "s.jsonl"
    good = json.dumps(ours(0, details="\U0001f600"), ensure_ascii=True)
    bad = json.dumps(ours(1)).replace('"ff-1"', '"ff-\\ud800"')
    src.write_text(good + "\n" + bad + "\n")
    repo = repo_for(tmp_path)
    with pytest.raises(IngestError, match=r"^line 2: flowfile_uuid: .*surrogate \(\\ud800\)"):
        ingest_file(repo, src)
    arr = tmp_path / "s.json"
    arr.write_text("[" + good + "," + bad + "]")
    with pytest.raises(IngestError, match=r"^record 2: flowfile_uuid: .*surrogate"):
        ingest_file(repo, arr)
    src.write_text(good + "\n")
    ingest_file(repo, src)
    assert repo.sql("SELECT details FROM provenance")[1] == [("\U0001f600",)]
    repo.close()
