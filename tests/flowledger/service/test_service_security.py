"""Trying to break the service: the token, the SQL sandbox, path escapes, body sizes, slow
queries. Every test talks to a real `flowledger serve` process."""

from __future__ import annotations

import http.client
import json
import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from provenance import ProvenanceEvent, ProvenanceRepository
from storage import open_store
from tests.support.service import TOKEN, Client, ServiceProcess

pytestmark = pytest.mark.unit

SECRET = "top-secret-line"


@pytest.fixture(scope="module")
def outside(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Files a query must never read: one anywhere, one in a `.tmp` of the working dir."""
    root = tmp_path_factory.mktemp("outside")
    (root / "secret.csv").write_text(f"a\n{SECRET}\n")
    (root / ".tmp").mkdir()
    (root / ".tmp" / "spill.csv").write_text(f"a\n{SECRET}\n")
    return root


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, outside: Path) -> Iterator[ServiceProcess]:
    repo = str(tmp_path_factory.mktemp("sec") / "repo")
    with ProvenanceRepository.open(open_store(repo)) as prov:
        prov.register_events(
            [ProvenanceEvent("CREATE", f"ff-{i}", "gen", "Gen", i) for i in range(20)], sync=True
        )
    env = {
        "FLOWLEDGER_SQL_TIMEOUT_S": "1",
        "FLOWLEDGER_SQL_CONCURRENCY": "2",
        "FLOWLEDGER_SQL_MAX_ROWS": "5",
        "FLOWLEDGER_MAX_REQUEST_SIZE": "100000",
    }
    # cwd = the folder with `.tmp/`: DuckDB's default temp folder would have been readable.
    cwd = os.getcwd()
    os.chdir(outside)
    try:
        proc = ServiceProcess(repo, env)
    finally:
        os.chdir(cwd)
    yield proc
    proc.stop()
    assert TOKEN not in proc.log


@pytest.fixture
def api(server: ServiceProcess) -> Client:
    return server.client


def _sql(api: Client, sql: str) -> tuple[int, str]:
    r = api.post("/sql", {"sql": sql})
    body = r.json()
    return r.status, body.get("detail", "") if isinstance(body, dict) else ""


@pytest.mark.parametrize(
    "statement",
    [
        "COPY provenance TO '{out}/copy.csv'",
        "COPY (SELECT 1) TO '{out}/copy2.csv'",
        "EXPORT DATABASE '{out}/export'",
        "ATTACH '{out}/x.duckdb' AS x",
        "DETACH x",
        "INSTALL httpfs",
        "LOAD httpfs",
        "SET enable_external_access=true",
        "SET temp_directory='{out}'",
        "RESET lock_configuration",
        "PRAGMA database_list",
        "CALL duckdb_settings()",
        "CREATE TABLE t AS SELECT 1",
        "CREATE MACRO m() AS 1",
        "DROP VIEW provenance",
        "DELETE FROM provenance",
        "UPDATE provenance SET file_size = 0",
        "INSERT INTO provenance SELECT * FROM provenance",
        "USE memory",
        "CHECKPOINT",
        "VACUUM",
        "EXPLAIN SELECT 1",
        "SELECT 1; SELECT 2",
        "SELECT * FROM provenance; COPY provenance TO '{out}/x.csv'",
    ],
)
def test_every_forbidden_statement_kind_is_refused(
    api: Client, outside: Path, statement: str
) -> None:
    status, detail = _sql(api, statement.format(out=outside))
    assert status in (400, 403), (statement, status, detail)
    assert detail and "\n" not in detail
    assert not any(p.name.startswith(("copy", "export", "x.")) for p in outside.iterdir())


@pytest.mark.parametrize(
    "query",
    [
        "SELECT * FROM read_csv('{out}/secret.csv')",
        "SELECT * FROM read_csv_auto('{out}/secret.csv')",
        "SELECT * FROM '{out}/secret.csv'",
        "SELECT * FROM read_text('{out}/secret.csv')",
        "SELECT * FROM read_blob('{out}/secret.csv')",
        "SELECT * FROM glob('{out}/*')",
        "SELECT * FROM read_parquet('{out}/*.parquet')",
        "SELECT * FROM read_csv('.tmp/spill.csv')",
        "SELECT * FROM read_csv('{out}/.tmp/spill.csv')",
        "SELECT * FROM query('SELECT * FROM read_csv(''{out}/secret.csv'')')",
        "WITH x AS (SELECT * FROM read_csv('{out}/secret.csv')) SELECT * FROM x",
        "SELECT (SELECT max(a) FROM read_csv('{out}/secret.csv')) FROM provenance",
        "SELECT * FROM provenance WHERE details IN (FROM read_text('{out}/secret.csv'))",
        "SELECT * FROM duckdb_settings()",
        "SELECT * FROM duckdb_secrets()",
        "SELECT * FROM information_schema.tables",
        "SELECT * FROM provenance_journals",
        "SELECT * FROM system.main.duckdb_tables()",
    ],
)
def test_reading_anything_but_the_view_is_refused(api: Client, outside: Path, query: str) -> None:
    status, detail = _sql(api, query.format(out=outside))
    assert status in (400, 403), (query, status, detail)
    assert SECRET not in detail


def test_connection_itself_cannot_read_its_temp_folder_or_cwd(
    tmp_path: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Below the parse-tree check: the DuckDB connection of the view refuses files too."""
    monkeypatch.chdir(outside)
    with ProvenanceRepository.open(open_store(str(tmp_path / "r"))) as prov:
        con = prov.sql_connection(temp_dir=tmp_path / "private-tmp")
        try:
            for path in (".tmp/spill.csv", f"{outside}/.tmp/spill.csv", f"{outside}/secret.csv"):
                with pytest.raises(Exception, match=r"(?i)permission|access|not allowed"):
                    con.execute(f"SELECT * FROM read_csv('{path}')").fetchall()
        finally:
            con.close()


def test_select_works_with_a_row_limit(api: Client) -> None:
    r = api.post("/sql", {"sql": "SELECT event_id FROM provenance ORDER BY event_id"})
    assert r.status == 200, r.body
    assert r.json()["rows"] == [[0], [1], [2], [3], [4]] and r.json()["truncated"] is True
    r = api.post("/sql", {"sql": "WITH c AS (SELECT * FROM provenance) SELECT count(*) FROM c"})
    assert r.status == 200 and r.json()["rows"] == [[20]]
    r = api.post("/sql", {"sql": "SELECT count(*) FROM range(10)"})
    assert r.status == 200 and r.json()["rows"] == [[10]]


def test_slow_queries_are_interrupted_and_health_still_answers(api: Client) -> None:
    slow = "SELECT sum(hash(i)) FROM range(1000000000000) t(i)"
    answers: list[int] = []
    done = threading.Event()

    def client() -> None:
        answers.append(api.post("/sql", {"sql": slow}).status)

    threads = [threading.Thread(target=client) for _ in range(12)]
    for t in threads:
        t.start()
    health_while_busy = api.get("/health", token=None).status
    still_running = any(t.is_alive() for t in threads)
    for t in threads:
        t.join(120)
    done.set()
    assert health_while_busy == 200
    assert still_running  # /health was answered while slow queries held every SQL slot
    assert sorted(set(answers)) <= [413, 503] and 413 in answers, answers
    r = api.post("/sql", {"sql": "SELECT count(*) FROM provenance"})
    assert r.status == 200 and r.json()["rows"] == [[20]]  # the workers were freed


def test_oversized_bodies_are_refused(api: Client) -> None:
    big = b"x" * 200_000
    r = api.post("/content", raw=big, headers={"Content-Type": "application/octet-stream"})
    assert r.status == 413 and "limit" in r.json()["detail"]
    r = api.post("/sql", {"sql": "SELECT 1 -- " + "x" * 150_000})
    assert r.status == 413
    # A chunked body (no Content-Length) is counted while it streams.
    conn = http.client.HTTPConnection(api.host, api.port, timeout=60)
    try:
        conn.request(
            "POST",
            "/content",
            body=iter([b"y" * 40_000] * 5),
            headers={"Authorization": f"Bearer {TOKEN}"},
            encode_chunked=True,
        )
        resp = conn.getresponse()
        assert resp.status == 413 and b"limit" in resp.read()
    finally:
        conn.close()


def test_path_escapes_are_refused(api: Client, outside: Path) -> None:
    for name in ("..", "...", "a..b", "x%2F..%2F..%2Fetc", "%2e%2e", "s3:", "a%20b"):
        r = api.get(f"/tables/{name}/timeline")
        assert r.status in (403, 404), (name, r.status, r.body)
    claim = {
        "container": "default",
        "section": "..",
        "identifier": "..%2F..%2Fsecret.csv",
        "offset": 0,
        "length": 5,
        "checksum": "crc32:00000000",
    }
    q = "&".join(f"{k}={v}" for k, v in claim.items())
    r = api.get(f"/content?{q}")
    assert r.status == 403, r.body
    r = api.get(f"/content?{q.replace('default', '..%2F..%2Fetc')}")
    assert r.status in (403, 404)
    assert SECRET.encode() not in r.body


def test_bad_input_is_one_clear_4xx_never_a_500(api: Client) -> None:
    cases = [
        ("POST", "/sql", b"not json"),
        ("POST", "/sql", b'{"sql": 5}'),
        ("POST", "/sql", b'{"sql": "SELEC broken"}'),
        ("POST", "/sql", b'{"sql": "SELECT no_such_column FROM provenance"}'),
        ("POST", "/nifi-api/provenance", b'{"provenance": {"request": {"maxResults": -1}}}'),
        ("POST", "/nifi-api/provenance", b'{"provenance": {"request": {"startDate": "x"}}}'),
        ("POST", "/nifi-api/provenance/lineage", b'{"lineage": {"request": {"uuid": "none"}}}'),
        ("POST", "/nifi-api/provenance-events/replays", b'{"eventId": 12345}'),
        ("GET", "/nifi-api/provenance-events/abc", None),
        ("GET", "/nifi-api/provenance-events/0/content/sideways", None),
        ("POST", "/provenance/events", b"\xff\xfe"),
        ("POST", "/provenance/events", b"[1, 2]"),
        ("GET", "/content?container=default", None),
    ]
    for method, path, raw in cases:
        r = api.request(method, path, raw=raw, headers={"Content-Type": "application/json"})
        assert 400 <= r.status < 500, (path, raw, r.status, r.body)
        detail = json.loads(r.body)["detail"]
        assert isinstance(detail, str) and detail and "Traceback" not in detail


def test_generated_token_is_owner_only_and_printed_once(tmp_path: Path) -> None:
    repo = str(tmp_path / "repo")
    first = ServiceProcess(repo, env={"FLOWLEDGER_TOKEN": ""})
    try:
        token_file = Path(repo) / ".flowledger-state" / "token"
        token = token_file.read_text().strip()
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        assert stat.S_IMODE(token_file.parent.stat().st_mode) == 0o700
        assert first.log.count(token) == 1  # printed once, on first start
        assert Client(first.host, first.port, token).get("/tables").status == 200
        assert Client(first.host, first.port, TOKEN).get("/tables").status == 401
    finally:
        first.stop()
    second = ServiceProcess(repo, env={"FLOWLEDGER_TOKEN": ""})
    try:
        assert token not in second.log  # not shown again
        assert Client(second.host, second.port, token).get("/tables").status == 200
    finally:
        second.stop()
    token_file.chmod(0o644)
    with pytest.raises(RuntimeError, match="readable by others"):
        ServiceProcess(repo, env={"FLOWLEDGER_TOKEN": ""})


def test_refuses_a_remote_interface_unless_allowed(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="allow-remote"):
        ServiceProcess(str(tmp_path / "r"), args=("--host", "0.0.0.0"))
