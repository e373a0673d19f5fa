"""Provenance of Spark commits (the post-commit hook), from CommitInfo and real Parquet files."""

from __future__ import annotations

import io
import pickle
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from flowledger.spark import (
    CommitInfo,
    OutputFile,
    SparkJobInfo,
    catch_up,
    events_for_commit,
    input_files,
    record_commit,
    upstream,
)
from flowledger.spark.commit_info import JOB_METADATA_KEY, REPO_CONF_KEY
from provenance import ProvenanceRepository, validate
from storage import StoreSettings, open_store
from storage.s3a import to_spark_path
from timeline.metadata import DataFile
from timeline.table import Table

pytestmark = pytest.mark.unit
LOCAL = StoreSettings(fsync=False)


class _Conf(dict[str, str]):
    pass


class _Session:
    """What `install` uses of a Spark session: its conf, and room for the hooks it keeps."""

    def __init__(self, conf: dict[str, str]) -> None:
        self.conf = _Conf(conf)


def _inputs(tmp_path: Path, n: int) -> list[str]:
    out = []
    for i in range(n):
        path = tmp_path / "in" / f"part-{i}.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("id,v\n" + "".join(f"{j},{i}\n" for j in range(5)))
        out.append("file://" + str(path))
    return out


def _commit_table(table_uri: str, job: SparkJobInfo, partitions: list[str]) -> CommitInfo:
    """A real commit on the timeline: Parquet files by pyarrow, job info in the metadata."""
    table = Table.open(open_store(table_uri, LOCAL))
    txn = table.begin(action="commit")
    files = []
    for i, part in enumerate(partitions):
        buf = io.BytesIO()
        pq.write_table(pa.table({"id": list(range(i + 3))}), buf)
        key = txn.data_key(part, f"part-{i}.parquet")
        table.store.put_if_absent(key, buf.getvalue())
        data = DataFile(key, len(buf.getvalue()), i + 3, part)
        txn.add(data)
        files.append(OutputFile(f"{to_spark_path(table_uri)}/{key}", data.rows, data.size, part))
    instant = txn.commit(extra_metadata={JOB_METADATA_KEY: job.to_json(), "operation": "insert"})
    return CommitInfo(table_uri, instant.time, "commit", "insert", tuple(files), job)


def _job(inputs: list[str]) -> SparkJobInfo:
    return SparkJobInfo("local-1700000000000", "etl", "flowledger.write", "ann", tuple(inputs))


def test_events_of_a_commit_are_nifi_events_and_deterministic(tmp_path: Path) -> None:
    info = CommitInfo(
        "s3a://bucket/tables/t",
        "20260101120000000",
        "commit",
        "insert",
        (
            OutputFile("s3a://bucket/tables/t/a.parquet", 10, 100),
            OutputFile("s3a://bucket/tables/t/b.parquet", 5, 50),
        ),
        _job(["s3a://bucket/in/1.csv", "s3a://bucket/in/2.csv"]),
    )
    events = validate(events_for_commit(info))
    assert [e.event_type for e in events] == ["RECEIVE", "RECEIVE", "JOIN", "FORK", "SEND", "SEND"]
    receives, join, fork, sends = events[:2], events[2], events[3], events[4:]
    assert [e.transit_uri for e in receives] == list(info.job.input_files)
    assert set(join.parent_uuids) == {e.flowfile_uuid for e in receives}
    assert fork.parent_uuids == (join.flowfile_uuid,) == (fork.flowfile_uuid,)
    assert set(fork.child_uuids) == {e.flowfile_uuid for e in sends}
    assert [(e.transit_uri, e.file_size) for e in sends] == [(f.uri, f.size) for f in info.files]
    assert {(e.component_id, e.component_type) for e in events} == {(info.job.app_id, "SparkJob")}
    assert events_for_commit(info) == events  # same commit, same FlowFile UUIDs
    # s3:// and s3a:// name the same table: the same FlowFiles.
    same = CommitInfo(
        "s3://bucket/tables/t",
        *(info.instant_time, info.action, info.operation, info.files, info.job),
    )
    assert [e.flowfile_uuid for e in events_for_commit(same)] == [e.flowfile_uuid for e in events]


def test_single_input_is_content_modified_and_no_input_is_create() -> None:
    out = (OutputFile("file:///t/a.parquet", 1, 10),)
    one = events_for_commit(
        CommitInfo(
            "file:///t", "20260101120000000", "commit", "insert", out, _job(["file:///in.csv"])
        )
    )
    assert [e.event_type for e in one] == ["RECEIVE", "CONTENT_MODIFIED", "FORK", "SEND"]
    assert one[0].flowfile_uuid == one[1].flowfile_uuid == one[2].flowfile_uuid
    none = events_for_commit(
        CommitInfo("file:///t", "20260101120000000", "commit", "insert", out, _job([]))
    )
    assert [e.event_type for e in none] == ["CREATE", "FORK", "SEND"]


def test_recorded_commit_lineage_of_each_output_names_its_inputs(tmp_path: Path) -> None:
    inputs = _inputs(tmp_path, 3)
    repo_uri = "file://" + str(tmp_path / "repo")
    info = _commit_table("file://" + str(tmp_path / "t"), _job(inputs), ["", "", "p=1"])
    info = CommitInfo(**{**info.__dict__, "repo_uri": repo_uri})
    assert record_commit(info, LOCAL) == 3 + 1 + 1 + 3
    assert record_commit(info, LOCAL) == 0  # idempotent
    with ProvenanceRepository.open(open_store(repo_uri, LOCAL)) as repo:
        sends = [e for e in repo.get_events(0, 100) if e.event_type == "SEND"]
        assert sorted(e.transit_uri or "" for e in sends) == sorted(f.uri for f in info.files)
        for send in sends:
            assert input_files(repo, send.flowfile_uuid) == sorted(inputs)
            # NiFi's own lineage of the output shows the FORK whose parent is the job...
            nifi = repo.lineage(send.flowfile_uuid)
            assert {n.event_type for n in nifi.nodes if n.kind == "EVENT"} == {"FORK", "SEND"}
            # ... and the expanded graph reaches every input file's RECEIVE through the JOIN.
            graph = upstream(repo, send.flowfile_uuid)
            types = [n.event_type for n in graph.nodes if n.kind == "EVENT"]
            assert sorted(types) == ["FORK", "JOIN", "RECEIVE", "RECEIVE", "RECEIVE", "SEND"]
            edges = {(e.source, e.target) for e in graph.edges}
            assert any(t == f"flowfile:{send.flowfile_uuid}" for _, t in edges)
        marker = f"{info.table_uri}#instant={info.instant_time}"
        _, rows = repo.sql(
            "SELECT event_type, count(*) FROM provenance "
            f"WHERE alternate_identifier_uri = '{marker}' GROUP BY 1 ORDER BY 1"
        )
        assert rows == [("FORK", 1), ("JOIN", 1), ("RECEIVE", 3), ("SEND", 3)]


def test_catch_up_records_only_missing_commits_from_the_timeline(tmp_path: Path) -> None:
    inputs = _inputs(tmp_path, 2)
    table_uri = "file://" + str(tmp_path / "t")
    repo_uri = "file://" + str(tmp_path / "repo")
    first = _commit_table(table_uri, _job(inputs[:1]), [""])
    second = _commit_table(table_uri, _job(inputs), ["", ""])
    # The hook ran for the first commit only (the driver died before the second's hook).
    assert record_commit(CommitInfo(**{**first.__dict__, "repo_uri": repo_uri}), LOCAL) == 4
    assert catch_up(table_uri, repo_uri, LOCAL) == len(events_for_commit(second))
    assert catch_up(table_uri, repo_uri, LOCAL) == 0
    # The events rebuilt from the timeline are the ones the hook would have written.
    late_hook = CommitInfo(**{**second.__dict__, "repo_uri": repo_uri})
    assert record_commit(late_hook, LOCAL) == 0
    with ProvenanceRepository.open(open_store(repo_uri, LOCAL)) as repo:
        send = next(e for e in events_for_commit(second) if e.event_type == "SEND")
        assert input_files(repo, send.flowfile_uuid) == sorted(inputs)


def test_commit_without_repository_records_nothing(tmp_path: Path) -> None:
    info = CommitInfo("file:///t", "20260101120000000", "commit", "insert", (), _job([]))
    assert record_commit(info) == 0


def test_installed_hook_records_and_never_fails_a_committed_write(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from flowledger.spark import commit_hooks, install, lineage

    # Hooks belong to the session they are installed on: a stand-in session keeps this
    # test's installation from reaching any other.
    spark = _Session({REPO_CONF_KEY: "file:///repo"})
    install(spark, settings=None)
    install(spark, settings=LOCAL)
    install(spark, settings=LOCAL)
    hooks = commit_hooks(spark)
    assert commit_hooks(_Session({})) == ()
    assert hooks == (lineage.ProvenanceHook(LOCAL),)  # installed once, the latest settings
    # The data source's commit worker gets the hook pickled, with the settings it holds.
    assert pickle.loads(pickle.dumps(hooks[0])).settings == LOCAL
    repo_uri = "file://" + str(tmp_path / "repo")
    info = _commit_table("file://" + str(tmp_path / "t"), _job(_inputs(tmp_path, 2)), [""])
    for hook in hooks:  # what the writers do after completing an instant
        hook(CommitInfo(**{**info.__dict__, "repo_uri": repo_uri}))
    with ProvenanceRepository.open(open_store(repo_uri, LOCAL)) as repo:
        assert [e.event_type for e in repo.get_events(0, 10)] == [
            "RECEIVE", "RECEIVE", "JOIN", "FORK", "SEND",
        ]  # fmt: skip
    (tmp_path / "blocked").write_text("a file where the repository should be")
    broken = CommitInfo(**{**info.__dict__, "repo_uri": "file://" + str(tmp_path / "blocked")})
    for hook in hooks:
        hook(broken)  # logged, not raised: the write is already committed
        hook.close()  # type: ignore[attr-defined]
    assert "catch_up" in caplog.text


def test_the_installed_hook_keeps_its_repository_open_from_commit_to_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the driver the hook records each commit into the repository it opened for the
    first (a commit then reads only the journals new since); pickled for Spark's commit
    worker it opens the repository for its one commit. Past `max_open` repositories the one
    used longest ago is closed, and a hook replaced by one of other settings closes its own."""
    from flowledger.spark import commit_hooks, install, lineage

    opened: list[ProvenanceRepository] = []
    closed: list[ProvenanceRepository] = []
    real_open, real_close = ProvenanceRepository.open, ProvenanceRepository.close

    def counting_open(store: object, *args: object, **kwargs: object) -> ProvenanceRepository:
        opened.append(real_open(store, *args, **kwargs))  # type: ignore[arg-type]
        return opened[-1]

    def counting_close(self: ProvenanceRepository) -> None:
        closed.append(self)
        real_close(self)

    monkeypatch.setattr(ProvenanceRepository, "open", counting_open)
    monkeypatch.setattr(ProvenanceRepository, "close", counting_close)
    spark = _Session({REPO_CONF_KEY: "file:///repo"})
    install(spark, settings=LOCAL)
    (hook,) = commit_hooks(spark)
    assert isinstance(hook, lineage.ProvenanceHook) and hook.recorder is not None
    table_uri = "file://" + str(tmp_path / "t")
    repos = ["file://" + str(tmp_path / f"repo{i}") for i in range(3)]
    infos = [_commit_table(table_uri, _job(_inputs(tmp_path, 1)), [""]) for _ in range(3)]
    for info in infos[:2]:
        hook(CommitInfo(**{**info.__dict__, "repo_uri": repos[0]}))
    assert len(opened) == 1 and closed == []  # one open for both commits
    # Pickled, as the data source sends it to the commit worker: one open per commit.
    sent = pickle.loads(pickle.dumps(hook))
    assert sent == hook and sent.recorder is None
    sent(CommitInfo(**{**infos[2].__dict__, "repo_uri": repos[1]}))
    assert len(opened) == 2 and len(closed) == 1
    # Bounded: with room for one, a second repository closes the first.
    hook.recorder.max_open = 1
    hook(CommitInfo(**{**infos[2].__dict__, "repo_uri": repos[2]}))
    assert len(opened) == 3 and closed[-1] is opened[0]
    for i, repo_uri in ((0, repos[0]), (1, repos[0]), (2, repos[1]), (2, repos[2])):
        with real_open(open_store(repo_uri, LOCAL)) as repo:
            marker = f"#instant={infos[i].instant_time}"
            assert any(marker in (e.alternate_identifier_uri or "") for e in repo.get_events(0, 50))
    kept = opened[2]
    before = len(closed)
    install(spark, settings=LOCAL)  # the same settings: the same hook, still open
    assert commit_hooks(spark) == (hook,) and len(closed) == before
    install(spark, settings=StoreSettings(fsync=True))  # other settings: the old one closed
    assert len(closed) == before + 1 and closed[-1] is kept
    new_hook = commit_hooks(spark)[0]
    assert isinstance(new_hook, lineage.ProvenanceHook)
    new_hook.close()


def test_a_repository_let_go_while_a_commit_records_into_it_closes_after_that_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A recorder with room for one repository lets the first go when a commit records into
    a second; a commit still recording into the first finishes (its events stored) and the
    repository is closed after it, not under it. Closing the recorder likewise waits for it."""
    import threading

    from flowledger.spark import CommitRecorder, lineage

    table_uri = "file://" + str(tmp_path / "t")
    repos = ["file://" + str(tmp_path / f"repo{i}") for i in range(2)]
    infos = [_commit_table(table_uri, _job(_inputs(tmp_path, 1)), [""]) for _ in range(3)]
    recording, go_on = threading.Event(), threading.Event()
    real_record_in = lineage.record_in

    def slow_record_in(repo: ProvenanceRepository, info: CommitInfo, *a: object) -> int:
        if info.repo_uri == repos[0]:
            recording.set()
            assert go_on.wait(30)
        return real_record_in(repo, info, *a)  # type: ignore[arg-type]

    closed: list[ProvenanceRepository] = []
    real_close = ProvenanceRepository.close

    def counting_close(self: ProvenanceRepository) -> None:
        closed.append(self)
        real_close(self)

    monkeypatch.setattr(lineage, "record_in", slow_record_in)
    monkeypatch.setattr(ProvenanceRepository, "close", counting_close)
    recorded: list[int] = []
    for last_step in ("let go", "recorder closed"):
        recording.clear()
        go_on.clear()
        recorder = CommitRecorder(LOCAL, max_open=1)
        first = recorder.repository(repos[0])
        i = 0 if last_step == "let go" else 1
        info = CommitInfo(**{**infos[i].__dict__, "repo_uri": repos[0]})
        slow = threading.Thread(
            target=lambda r=recorder, info=info: recorded.append(r.record(info))
        )
        slow.start()
        try:
            assert recording.wait(30)
            if last_step == "let go":  # a second repository takes the only room
                recorder.record(CommitInfo(**{**infos[2].__dict__, "repo_uri": repos[1]}))
            else:
                recorder.close()
            assert first not in closed  # still in use by the slow record
        finally:
            go_on.set()
            slow.join(30)
        assert first in closed
        recorder.close()
    assert len(recorded) == 2 and all(n > 0 for n in recorded)
    for i in (0, 1):
        with ProvenanceRepository.open(open_store(repos[0], LOCAL)) as repo:
            marker = f"#instant={infos[i].instant_time}"
            assert any(marker in (e.alternate_identifier_uri or "") for e in repo.get_events(0, 50))


def test_repositories_a_recorder_keeps_are_closed_when_the_process_exits(tmp_path: Path) -> None:
    """A session's hook keeps its recorder until the process ends and nothing closes it: the
    repositories still open are closed at exit, not abandoned with their background work."""
    import subprocess
    import sys
    import textwrap

    repo = "file://" + str(tmp_path / "repo")
    script = textwrap.dedent(
        f"""
        from provenance import ProvenanceRepository
        from storage import StoreSettings
        from flowledger.spark import CommitRecorder

        real_close = ProvenanceRepository.close

        def close(self):
            print("closed", flush=True)
            real_close(self)

        ProvenanceRepository.close = close
        recorder = CommitRecorder(StoreSettings(fsync=False))
        recorder.repository({repo!r})
        print("open", flush=True)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["open", "closed"], done.stdout
