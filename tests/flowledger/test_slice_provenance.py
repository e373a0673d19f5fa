"""Provenance of keyed commits: a SEND per written file slice whose lineage names the slice it
replaced and the job's inputs, so a row version's lineage reaches every raw input file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from flowledger.cli import app
from flowledger.pipeline.trace import trace
from flowledger.slice_provenance import CommitJob, SliceProvenance, record_commit, slice_uuid
from provenance import ProvenanceRepository, Query, SearchTerm
from storage import open_store
from tests.support.servers import S3Endpoint
from timeline import Table, parse_time
from timeline.keyed import KeyedProperties

runner = CliRunner()

#: Walks a row version's commit to the RECEIVE events of its ancestors, in SQL.
ROW_TO_INPUTS = """
WITH RECURSIVE
  row AS (SELECT _flowledger_commit_time AS t FROM t WHERE id = 2),
  slice AS (SELECT DISTINCT p.flowfile_uuid AS u FROM provenance p, row
            WHERE p.event_type = 'SEND' AND p.updated_attributes['instant.time'] = row.t),
  anc(u) AS (SELECT u FROM slice UNION
             SELECT unnest(e.parent_uuids) FROM provenance e JOIN anc
             ON list_contains(e.child_uuids, anc.u))
SELECT DISTINCT p.transit_uri FROM provenance p JOIN anc ON p.flowfile_uuid = anc.u
WHERE p.event_type = 'RECEIVE' ORDER BY 1
"""


def _sources(prov: ProvenanceRepository, uuid: str) -> set[str]:
    return {(e.transit_uri or "").rsplit("/", 1)[-1] for e in trace(prov, uuid).sources()}


@pytest.mark.unit
def test_each_slice_names_the_slice_it_replaced_and_the_inputs(tmp_path: Path) -> None:
    repo = open_store(str(tmp_path / "repo"))
    with ProvenanceRepository.open(repo) as prov:
        table = Table.create(repo.scoped("tables/t"), KeyedProperties.of("id"))
        hook = SliceProvenance(prov)
        table.post_commit.append(hook)
        hook.job = CommitJob(inputs=("s3://in/a.csv",))
        table.upsert(pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]}))
        first = table.files()[0]
        hook.job = CommitJob(inputs=("s3://in/b.csv", "s3://in/c.csv"))
        table.upsert(pa.table({"id": [2], "v": ["B"]}))
        hook.job = CommitJob()  # a delete by keys reads no file
        done = table.delete([3])
        last = table.files()[0]
        assert last.group == first.group and last.path != first.path  # a third slice
        assert _sources(prov, slice_uuid(table.store.url(last.path))) == {
            "a.csv",
            "b.csv",
            "c.csv",
        }
        _, rows = prov.sql(
            "SELECT updated_attributes['prev_commit'], updated_attributes['deletes'] "
            f"FROM provenance WHERE event_type = 'SEND' AND transit_uri = "
            f"'{table.store.url(last.path)}'"
        )
        assert rows == [(table.entry(done.time).metadata["write_stats"][0]["prev_commit"], "1")]
        # Recording a commit again adds nothing (its marker is found).
        assert record_commit(prov, table, table.entry(done.time)) == 0


@pytest.mark.unit
def test_a_slices_lineage_starts_when_its_oldest_ancestor_entered(tmp_path: Path) -> None:
    """As NiFi dates a JOIN's child: the earliest lineage start date of its parents, so the
    window of "expand parents" (lineage start to the JOIN) holds the replaced slice's events."""
    repo = open_store(str(tmp_path / "repo"))
    with ProvenanceRepository.open(repo) as prov:
        table = Table.create(repo.scoped("tables/t"), KeyedProperties.of("id"))
        table.post_commit.append(SliceProvenance(prov, CommitJob(inputs=("s3://in/a.csv",))))
        first = table.upsert(pa.table({"id": [1, 2], "v": ["a", "b"]}))
        table.upsert(pa.table({"id": [2], "v": ["B"]}))
        table.upsert(pa.table({"id": [1], "v": ["A"]}))
        _, rows = prov.sql(
            "SELECT DISTINCT epoch_ms(lineage_start_date) FROM provenance WHERE event_type = 'SEND'"
        )
        assert rows == [(int(parse_time(first.time).timestamp() * 1000),)]
        newest = slice_uuid(table.store.url(table.files()[0].path))
        join = next(e for e in prov.query(Query((SearchTerm("flowfile_uuid", newest),)))
                    if e.event_type == "JOIN" and e.flowfile_uuid == newest)  # fmt: skip
        parents = prov.expand_parents(join.event_id)
        assert set(join.parent_uuids) <= {n.flowfile_uuid for n in parents.nodes}
        assert len(parents.edges) >= len(join.parent_uuids)


@pytest.mark.unit
def test_cli_keyed_writes_record_slices_and_sql_walks_a_row_to_its_inputs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FLOWLEDGER_REPO")  # the embedded default, ./flowledger-data
    uri = "flowledger-data/tables/t"
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text("id,v\n1,x\n2,y\n")
    b.write_text("id,v\n2,z\n")

    def ok(*args: str) -> Any:
        result = runner.invoke(app, list(args))
        assert result.exit_code == 0, result.output
        return result.stdout

    ok("table", "create", uri, "--record-key", "id")
    ok("table", "write", uri, str(a), "--operation", "upsert")
    ok("table", "write", uri, str(b), "--operation", "upsert")
    rows = json.loads(ok("table", "sql", uri, ROW_TO_INPUTS, "--json"))
    assert [r["transit_uri"] for r in rows] == [a.as_uri(), b.as_uri()]


@pytest.mark.unit
def test_a_table_outside_the_repository_records_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FLOWLEDGER_REPO")  # the embedded default, ./flowledger-data
    a = tmp_path / "a.csv"
    a.write_text("id,v\n1,x\n")
    uri = str(tmp_path / "elsewhere" / "t")
    for args in (
        ["create", uri, "--record-key", "id"],
        ["write", uri, str(a), "--operation", "upsert"],
    ):
        result = runner.invoke(app, ["table", *args])
        assert result.exit_code == 0, result.output
    assert not (tmp_path / "flowledger-data").exists()


@pytest.mark.minio
def test_slices_on_minio_chain_through_every_version(minio: S3Endpoint) -> None:
    bucket = minio.new_bucket()
    repo = open_store(f"s3://{bucket}/lake", minio.settings())
    with ProvenanceRepository.open(repo) as prov:
        table = Table.create(repo.scoped("tables/t"), KeyedProperties.of("id"))
        for i, name in enumerate(("a.csv", "b.csv", "c.csv")):
            record = SliceProvenance(prov, CommitJob(inputs=(f"s3a://in/{name}",)))
            table.post_commit[:] = [record]
            table.upsert(pa.table({"id": [1, 2], "v": [str(i), str(i)]}))
        last = table.files()[0]
        uri = table.store.url(last.path)
        assert uri.startswith(f"s3://{bucket}/lake/tables/t/")
        # The s3a:// spelling of the same file names the same FlowFile.
        assert slice_uuid("s3a://" + uri.removeprefix("s3://")) == slice_uuid(uri)
        assert _sources(prov, slice_uuid(uri)) == {"a.csv", "b.csv", "c.csv"}
