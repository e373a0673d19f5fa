"""`flowledger table sql` and `POST /tables/{name}/sql`: DuckDB over a table's snapshot, time
travel or changes, beside the view `provenance`, read-only like `provenance sql`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from flowledger.cli import app
from flowledger.table_sql import TableRead, connect, table_name
from provenance import ProvenanceEvent, ProvenanceRepository
from provenance import sql as prov_sql
from provenance.errors import ReadOnlyQuery, SQLError
from storage import IntegrityError, open_store
from tests.support.servers import S3Endpoint
from tests.support.service import ServiceProcess
from timeline import Table
from timeline.keyed import KeyedProperties

runner = CliRunner()


def _keyed(store_uri: str, settings: Any = None) -> tuple[Table, list[str]]:
    """A keyed table with three commits: insert 1..3, update 2, delete 3."""
    t = Table.create(open_store(store_uri, settings), KeyedProperties.of("id"))
    times = [
        t.upsert(pa.table({"id": [1, 2, 3], "carrier": ["UA", "AA", "UA"], "delay": [5, 7, 9]})),
        t.upsert(pa.table({"id": [2], "carrier": ["AA"], "delay": [70]})),
        t.delete([3]),
    ]
    return t, [i.time for i in times]


def _rows(*args: str) -> list[dict[str, Any]]:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    rows: list[dict[str, Any]] = json.loads(result.stdout)
    return rows


@pytest.mark.unit
def test_snapshot_time_travel_and_changes_from_the_command_line(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    uri = str(repo / "tables" / "flights")
    _, (first, second, third) = _keyed(uri)
    q = "SELECT id, delay, _flowledger_commit_time AS w FROM flights ORDER BY id"
    now = _rows("table", "sql", uri, q, "--repo", str(repo))
    assert now == [{"id": 1, "delay": 5, "w": first}, {"id": 2, "delay": 70, "w": second}]
    old = _rows("table", "sql", uri, "SELECT count(*) AS n FROM t", "--as-of", first)
    assert old == [{"n": 3}]
    changed = _rows("table", "sql", uri, "SELECT id FROM t", "--changes-since", first)
    assert changed == [{"id": 2}]  # the deleted record is absent from an incremental read
    cdc = _rows(
        "table", "sql", uri, "SELECT op, record_key, instant FROM t ORDER BY instant",
        "--changes-since", first, "--cdc",
    )  # fmt: skip
    assert cdc == [
        {"op": "u", "record_key": "2", "instant": second},
        {"op": "d", "record_key": "3", "instant": third},
    ]


@pytest.mark.unit
def test_the_table_joins_provenance_in_one_connection(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "repo"))
    table, (first, *_) = _keyed(str(tmp_path / "repo" / "tables" / "flights"))
    with ProvenanceRepository.open(store) as prov:
        prov.register_events(
            [
                ProvenanceEvent(
                    "SEND", "ff-1", transit_uri="s3://x/f.parquet", component_id="writer",
                    component_type="Test", file_size=1,
                    updated_attributes={"instant.time": first},
                )
            ],
            sync=True,
        )  # fmt: skip
        con = connect(prov, table)
        try:
            names, rows = prov_sql.run(
                con,
                "SELECT f.id, p.transit_uri FROM flights f JOIN provenance p "
                "ON p.updated_attributes['instant.time'] = f._flowledger_commit_time",
            )
        finally:
            con.close()
    assert names == ["id", "transit_uri"] and rows == [(1, "s3://x/f.parquet")]


@pytest.mark.unit
def test_writes_and_file_access_are_refused(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "repo"))
    table, _ = _keyed(str(tmp_path / "repo" / "tables" / "flights"))
    outside = tmp_path / "secret.csv"
    outside.write_text("a\n1\n")
    with ProvenanceRepository.open(store) as prov:
        con = connect(prov, table)
        try:
            for bad in ("DELETE FROM flights", f"COPY flights TO '{tmp_path}/x.csv'", "ATTACH 'x'"):
                with pytest.raises(ReadOnlyQuery):
                    prov_sql.run(con, bad, "table sql")
            with pytest.raises(SQLError, match="disabled"):
                prov_sql.run(con, f"SELECT * FROM read_csv('{outside}')")
            with pytest.raises(ReadOnlyQuery):
                prov_sql.run(con, "SET enable_external_access=true")
            with pytest.raises(Exception, match=r"locked|disabled"):  # even on the connection
                con.execute("SET enable_external_access=true")
        finally:
            con.close()
    assert not (tmp_path / "x.csv").exists()


@pytest.mark.unit
def test_a_damaged_file_is_refused(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "repo"))
    table, _ = _keyed(str(tmp_path / "repo" / "tables" / "flights"))
    path = Path(table.store.url(table.files()[0].path).removeprefix("file://"))
    body = bytearray(path.read_bytes())
    body[10] ^= 0xFF
    path.write_bytes(bytes(body))
    with ProvenanceRepository.open(store) as prov, pytest.raises(IntegrityError):
        connect(prov, table)


@pytest.mark.unit
def test_an_empty_table_has_its_view(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "repo"))
    table = Table.create(
        open_store(str(tmp_path / "repo" / "tables" / "e")), KeyedProperties.of("id")
    )
    with ProvenanceRepository.open(store) as prov:
        con = connect(prov, table)
        try:
            assert prov_sql.run(con, "SELECT count(*) FROM e")[1] == [(0,)]
        finally:
            con.close()
    assert table_name("s3://b/lake/tables/delays_by_carrier/") == "delays_by_carrier"
    with pytest.raises(ValueError, match="--changes-since"):
        TableRead(cdc=True)


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    repo = tmp_path_factory.mktemp("svc") / "repo"
    _keyed(str(repo / "tables" / "flights"))
    proc = ServiceProcess(str(repo))
    yield proc
    proc.stop()


@pytest.mark.unit
def test_service_answers_sql_over_a_table_by_name(service: ServiceProcess) -> None:
    api = service.client
    r = api.post(
        "/tables/flights/sql",
        {"sql": "SELECT id, delay FROM flights ORDER BY id", "maxRows": 1},
    )
    assert r.status == 200, r.body[:300]
    assert r.json() == {"columns": ["id", "delay"], "rows": [[1, 5]], "truncated": True}
    r = api.post("/tables/flights/sql", {"sql": "SELECT count(*) FROM t, provenance"})
    assert r.status == 200 and r.json()["rows"] == [[0]]
    cdc = {"sql": "SELECT op FROM t ORDER BY op", "changesSince": "2000-01-01T00:00:00Z"}
    cdc["cdc"] = True  # type: ignore[assignment]
    r = api.post("/tables/flights/sql", cdc)
    assert r.status == 200 and r.json()["rows"] == [["d"], ["i"], ["i"], ["i"], ["u"]]


@pytest.mark.unit
def test_service_table_sql_is_sandboxed(service: ServiceProcess) -> None:
    api = service.client
    for sql in (
        "SELECT * FROM read_parquet('/etc/passwd')",
        "SELECT * FROM other",
        "COPY (SELECT 1) TO '/tmp/x'",
        "SELECT * FROM _flowledger_arrow_0",
    ):
        r = api.post("/tables/flights/sql", {"sql": sql})
        assert r.status == 403, (sql, r.status, r.body[:200])
    r = api.post("/tables/flights/sql", {"sql": "SELECT 1 FROM t", "asOf": "yesterday"})
    assert r.status == 400 and "yesterday" in r.json()["detail"]
    r = api.post("/tables/flights/sql", {"sql": "SELECT 1 FROM t", "cdc": True})
    assert r.status == 400 and "--changes-since" in r.json()["detail"]
    r = api.post("/tables/nope/sql", {"sql": "SELECT 1"})
    assert r.status == 404 and "nope" in r.json()["detail"]
    r = api.post("/tables/..%2Fx/sql", {"sql": "SELECT 1"})
    assert r.status in (403, 404)


@pytest.mark.minio
def test_table_sql_on_minio_reads_through_the_verified_cache(
    minio: S3Endpoint, tmp_path: Path
) -> None:
    bucket = minio.new_bucket()
    settings = minio.settings()
    table, (first, *_) = _keyed(f"s3://{bucket}/lake/tables/flights", settings)
    store = open_store(f"s3://{bucket}/lake", settings)
    gets = []
    with ProvenanceRepository.open(store) as prov:
        for _ in range(2):  # the second query finds every file in the cache
            before = table.store.stats.snapshot().get("GET", 0)
            con = connect(prov, Table.open(table.store), TableRead(as_of=first))
            try:
                _, rows = prov_sql.run(con, "SELECT sum(delay) FROM flights")
            finally:
                con.close()
            assert rows == [(21,)]
            gets.append(table.store.stats.snapshot().get("GET", 0) - before)
    files = len(table.snapshot(first).files)
    assert files and gets[1] <= gets[0] - files, gets  # no data file fetched again


@pytest.mark.unit
def test_merge_on_read_sql_sees_the_changes_still_in_logs(tmp_path: Path) -> None:
    uri = str(tmp_path / "tables" / "mor")
    t = Table.create(open_store(uri), KeyedProperties.of("id", table_type="merge_on_read"))
    t.upsert(pa.table({"id": [1, 2], "delay": [5, 7]}))
    t.upsert(pa.table({"id": [2], "delay": [70]}))  # a delta commit: a log block, no new base
    t.delete([1])
    base_only = t.read(read_optimized=True).sort_by("id").column("delay").to_pylist()
    assert base_only == [5, 7]  # the changes are still in logs, not compacted
    rows = _rows("table", "sql", uri, "SELECT id, delay FROM t ORDER BY id")
    assert rows == [{"id": 2, "delay": 70}]


#: Partition values a path cannot hold as they are, and one typed partition column.
PARTITIONED = pa.table(
    {
        "p": ["x y", "x_y", "a/b", "é ü", "x y", None],
        "n": pa.array([1, 2, 3, 4, 1, 5], pa.int32()),
        "v": [1, 2, 3, 4, 5, 6],
    }
)
STORED_GROUPS = [
    {"p": "a/b", "n": 3, "total": 3},
    {"p": "x y", "n": 1, "total": 6},
    {"p": "x_y", "n": 2, "total": 2},
    {"p": "é ü", "n": 4, "total": 4},
    {"p": None, "n": 5, "total": 6},
]


def _sql_rows(con: Any, query: str) -> list[dict[str, Any]]:
    names, rows = prov_sql.run(con, query)
    return [dict(zip(names, r, strict=True)) for r in rows]


@pytest.mark.unit
@pytest.mark.parametrize("keyed", [False, True])
def test_partition_columns_come_out_as_stored(tmp_path: Path, keyed: bool) -> None:
    """GROUP BY and WHERE on partition columns see the stored values and types, not the
    text of the folders they are written under."""
    repo = tmp_path / "repo"
    uri = str(repo / "tables" / "events")
    store = open_store(uri)
    if keyed:
        props = KeyedProperties.of("v", partition_by="p,n")
        Table.create(store, props).upsert(PARTITIONED)
    else:
        Table.open(store).write(PARTITIONED, partition_by=["p", "n"])
    q = "SELECT p, n, sum(v) AS total FROM events GROUP BY p, n ORDER BY p NULLS LAST"
    assert _rows("table", "sql", uri, q, "--repo", str(repo)) == STORED_GROUPS
    where = "SELECT v FROM t WHERE p = 'x y' AND n = 1 ORDER BY v"
    assert _rows("table", "sql", uri, where, "--repo", str(repo)) == [{"v": 1}, {"v": 5}]
    with ProvenanceRepository.open(open_store(str(repo))) as prov:
        con = connect(prov, Table.open(store))
        try:
            types = _sql_rows(con, "SELECT DISTINCT typeof(p) AS tp, typeof(n) AS tn FROM t")
        finally:
            con.close()
    assert types == [{"tp": "VARCHAR", "tn": "INTEGER"}]


@pytest.mark.minio
def test_partition_columns_come_out_as_stored_on_minio(minio: S3Endpoint) -> None:
    """On S3 the names are object keys (`%` included) and the files reach DuckDB through
    the local cache, whose paths repeat those keys."""
    bucket = minio.new_bucket()
    settings = minio.settings()
    table = Table.open(open_store(f"s3://{bucket}/lake/tables/events", settings))
    table.write(PARTITIONED, partition_by=["p", "n"])
    with ProvenanceRepository.open(open_store(f"s3://{bucket}/lake", settings)) as prov:
        con = connect(prov, Table.open(table.store))
        try:
            got = _sql_rows(
                con, "SELECT p, n, sum(v) AS total FROM t GROUP BY p, n ORDER BY p NULLS LAST"
            )
        finally:
            con.close()
    assert got == STORED_GROUPS
