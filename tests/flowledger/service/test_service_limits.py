"""Nobody can exhaust the service: bodies without a token are never read, connections that
never finish their headers are closed and cannot starve the others, SQL answers are bounded in
bytes and time, SQL cannot hold the threads lookups need, and hostile input is a 4xx (one line
in the CLI). Every test talks to a real `flowledger serve` process; the only time bounds are
liveness bounds far above what a healthy server needs."""

from __future__ import annotations

import base64
import contextlib
import json
import socket
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from flowledger.cli import main
from provenance import ProvenanceEvent, ProvenanceRepository
from storage import open_store
from tests.support.service import TOKEN, Client, ServiceProcess

pytestmark = pytest.mark.unit

#: A healthy server answers in milliseconds; this only tells "answers" from "hangs".
LIVENESS_S = 5.0


def _repo(root: Path) -> str:
    repo = str(root / "repo")
    with ProvenanceRepository.open(open_store(repo)) as prov:
        prov.register_events(
            [ProvenanceEvent("CREATE", f"ff-{i}", "gen", "Gen", i) for i in range(5)], sync=True
        )
    return repo


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    env = {
        "FLOWLEDGER_SQL_TIMEOUT_S": "0.5",
        "FLOWLEDGER_SQL_MAX_ANSWER_BYTES": "1000000",
        "FLOWLEDGER_MAX_REQUEST_SIZE": "100000",
    }
    proc = ServiceProcess(_repo(tmp_path_factory.mktemp("limits")), env)
    yield proc
    proc.stop()


def _send_head(host: str, port: int, head: bytes) -> socket.socket:
    sock = socket.create_connection((host, port), timeout=LIVENESS_S)
    sock.sendall(head)
    return sock


def _answer_head(sock: socket.socket) -> bytes:
    """The response's status line and headers (raises on a timeout: no answer)."""
    data = b""
    while b"\r\n\r\n" not in data:
        more = sock.recv(65536)
        if not more:
            break
        data += more
    return data


def test_a_body_without_the_token_is_never_read(server: ServiceProcess) -> None:
    """The 401 comes as soon as the headers are in: the 90 kB the request announces are never
    sent, so a server that waited for them (to parse the body before the token check) would
    not answer at all."""
    head = (
        b"POST /sql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: 90000\r\n\r\n"
    )
    sock = _send_head(server.host, server.port, head)
    try:
        answer = _answer_head(sock)
    finally:
        sock.close()
    assert answer.startswith(b"HTTP/1.1 401"), answer
    assert b"www-authenticate: Bearer" in answer.lower().replace(b"bearer", b"Bearer")
    assert b"connection: close" in answer.lower()  # the body is not read to keep the connection
    # A wrong token is refused the same way; a public path needs none.
    r = server.client.post("/sql", {"sql": "SELECT 1"}, token="wrong-token-0123456789")
    assert r.status == 401 and r.json()["detail"] == "invalid bearer token"
    assert server.client.get("/health", token=None).status == 200


def test_a_chunked_json_body_over_the_limit_is_413(server: ServiceProcess) -> None:
    """Counted while it streams, also for routes whose body FastAPI parses (it turned any
    other error there into a 400)."""
    import http.client

    conn = http.client.HTTPConnection(server.host, server.port, timeout=60)
    try:
        conn.request(
            "POST",
            "/sql",
            body=iter([b'{"sql": "SELECT 1 -- ', b"x" * 60_000, b"x" * 60_000, b'"}']),
            headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
            encode_chunked=True,
        )
        resp = conn.getresponse()
        detail = json.loads(resp.read())["detail"]
    finally:
        conn.close()
    assert resp.status == 413 and "max_request_size" in detail


def test_sql_answers_are_bounded_in_bytes(server: ServiceProcess) -> None:
    r = server.client.post("/sql", {"sql": "SELECT repeat('x', 400000) FROM range(5)"})
    assert r.status == 413, r.body[:200]
    assert "sql_max_answer_bytes" in r.json()["detail"]
    # Under the limit the answer is the usual one.
    r = server.client.post("/sql", {"sql": "SELECT repeat('x', 3) AS s, 1 AS s FROM range(2)"})
    assert r.status == 200
    assert r.json() == {"columns": ["s", "s"], "rows": [["xxx", 1], ["xxx", 1]], "truncated": False}
    r = server.client.post("/sql", {"sql": "SELECT event_id FROM provenance", "maxRows": 2})
    assert r.json()["rows"] == [[0], [1]] and r.json()["truncated"] is True


def test_the_time_limit_covers_the_conversion_after_duckdb(tmp_path: Path) -> None:
    """DuckDB hands these 10,000 rows of 1,000 numbers over quickly; turning 10 million values
    into JSON takes several times the 1 s limit: the answer is 413 (over a limit), not a late
    200."""
    env = {"FLOWLEDGER_SQL_TIMEOUT_S": "1", "FLOWLEDGER_SQL_MAX_ANSWER_BYTES": str(2**30)}
    server = ServiceProcess(_repo(tmp_path), env)
    try:
        sql = "SELECT l FROM (SELECT list(range) AS l FROM range(1000)), range(10000)"
        r = server.client.post("/sql", {"sql": sql})
        assert r.status == 413, r.body[:200]
        r = server.client.post("/sql", {"sql": "SELECT count(*) FROM provenance"})
        assert r.status == 200 and r.json()["rows"] == [[5]]
    finally:
        server.stop()


def test_hostile_input_is_a_4xx(server: ServiceProcess) -> None:
    # A query id is its request, compressed: one forged to a submission time past year 9999.
    raw = json.dumps(["query", {}, 10**20, 0], separators=(",", ":")).encode()
    forged = base64.urlsafe_b64encode(zlib.compress(raw)).decode().rstrip("=")
    r = server.client.get(f"/nifi-api/provenance/{forged}")
    assert r.status == 404, r.body
    deep = b"[" * 20_000 + b"]" * 20_000
    for body in (deep, b'{"event_type": "CREATE", "x": ' + deep + b"}"):
        r = server.client.post("/provenance/events", raw=body)
        assert r.status == 400, r.body[:200]
        assert "nested too deeply" in r.json()["detail"]
    json_type = {"Content-Type": "application/json"}
    r = server.client.post("/api/v1/lineage", raw=deep, headers=json_type)
    assert 400 <= r.status < 500, r.body[:200]


def test_deeply_nested_json_is_one_line_in_the_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000 + "\n")
    monkeypatch.setattr(
        "sys.argv", ["flowledger", "provenance", "ingest", "--repo", str(tmp_path / "r"), str(path)]
    )
    with pytest.raises(SystemExit) as done:
        main()
    err = capsys.readouterr().err.strip()
    assert done.value.code == 2, err  # the invalid-input exit code, not 70 (a bug)
    assert err == "flowledger: error: record 1: JSON nested too deeply"


def test_half_open_connections_cannot_starve_the_server(tmp_path: Path) -> None:
    """600 connections that never finish their headers against a process that may hold 400
    file descriptors: the server stays below its limit by closing the longest-idle of them,
    answers `/health` and authenticated requests meanwhile, closes the rest after the header
    timeout, and logs no tracebacks."""
    env = {"FLOWLEDGER_HEADER_TIMEOUT_S": "2", "FLOWLEDGER_MAX_CONNECTIONS": "1000"}
    server = ServiceProcess(_repo(tmp_path), env, nofile=400)
    slow: list[socket.socket] = []
    try:
        unfinished = b"GET /health HTTP/1.1\r\nHost: x\r\n"
        for _ in range(600):
            slow.append(_send_head(server.host, server.port, unfinished))
        client = Client(server.host, server.port)
        assert client.get("/health", token=None, timeout=LIVENESS_S).status == 200
        assert client.get("/tables", timeout=LIVENESS_S).status == 200
        # Every slow connection ends: closed to make room, or at the header timeout.
        for sock in slow:
            sock.settimeout(30)
            with contextlib.suppress(ConnectionResetError):  # closed with bytes unread
                assert sock.recv(1024) == b""
        assert client.get("/health", token=None, timeout=LIVENESS_S).status == 200
    finally:
        for sock in slow:
            sock.close()
        server.stop()
    log = server.log
    assert "Traceback" not in log and log.count("Too many open files") <= 3, log[-2000:]
    assert "max_connections lowered to" in log


def test_lookups_do_not_queue_behind_sql(tmp_path: Path) -> None:
    """150 slow queries at once against one SQL slot and a queue of 2: the rest are refused
    at once with Retry-After, and lookups (the shared thread pool) answer meanwhile."""
    env = {
        "FLOWLEDGER_SQL_TIMEOUT_S": "3",
        "FLOWLEDGER_SQL_CONCURRENCY": "1",
        "FLOWLEDGER_SQL_QUEUE_SIZE": "2",
        "FLOWLEDGER_SQL_QUEUE_TIMEOUT_S": "5",
    }
    server = ServiceProcess(_repo(tmp_path), env)
    client = Client(server.host, server.port)
    slow = "SELECT sum(hash(i)) FROM range(1000000000000) t(i)"
    answers: list[tuple[int, str | None]] = []
    started = threading.Barrier(151)

    def query() -> None:
        started.wait()
        r = client.post("/sql", {"sql": slow})
        answers.append((r.status, r.headers.get("retry-after")))

    threads = [threading.Thread(target=query) for _ in range(150)]
    try:
        for t in threads:
            t.start()
        started.wait()
        # Not the in-memory fast path: these go through the app and its thread pool.
        tables = client.get("/tables", timeout=LIVENESS_S)
        event = client.get("/nifi-api/provenance-events/3?x=1", timeout=LIVENESS_S)
        assert tables.status == 200 and event.status == 200
        for t in threads:
            t.join(120)
    finally:
        server.stop()
    statuses = [s for s, _ in answers]
    assert len(answers) == 150 and set(statuses) <= {413, 503}, statuses
    assert statuses.count(503) >= 140  # busy: unavailable, with Retry-After
    assert all(retry == "1" for s, retry in answers if s == 503)


def test_sql_memory_is_bounded(tmp_path: Path) -> None:
    server = ServiceProcess(_repo(tmp_path), {"FLOWLEDGER_SQL_MEMORY_LIMIT": str(64 * 2**20)})
    try:
        r = server.client.post("/sql", {"sql": "SELECT list(range) FROM range(30000000)"})
        ok = server.client.post("/sql", {"sql": "SELECT count(*) FROM provenance"})
    finally:
        server.stop()
    assert r.status == 413 and "sql_memory_limit" in r.json()["detail"], r.body[:300]
    assert ok.status == 200 and ok.json()["rows"] == [[5]]


def test_a_connection_beyond_the_limit_gets_503_when_all_are_busy(tmp_path: Path) -> None:
    """Three connections, each with a slow query in progress, fill a limit of three: a fourth
    is answered 503 with Retry-After and closed (busy connections are never closed for it)."""
    env = {
        "FLOWLEDGER_MAX_CONNECTIONS": "3",
        "FLOWLEDGER_SQL_CONCURRENCY": "3",
        "FLOWLEDGER_SQL_TIMEOUT_S": "3",
    }
    server = ServiceProcess(_repo(tmp_path), env)
    slow = json.dumps({"sql": "SELECT sum(hash(i)) FROM range(1000000000000) t(i)"}).encode()
    head = (
        f"POST /sql HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(slow)}\r\n\r\n"
    ).encode()
    busy: list[socket.socket] = []
    try:
        for _ in range(3):
            busy.append(_send_head(server.host, server.port, head + slow))
        # Until the server has read those requests their connections count as idle (and one
        # would be closed for the newcomer); reading them takes milliseconds.
        time.sleep(1)
        extra = socket.create_connection((server.host, server.port), timeout=LIVENESS_S)
        try:
            answer = _answer_head(extra)
        finally:
            extra.close()
        assert answer.startswith(b"HTTP/1.1 503"), answer
        assert b"retry-after: 1" in answer.lower()
        for sock in busy:  # the queries were not cut off: each gets its own answer
            sock.settimeout(30)
            # past sql_timeout_s: over a limit (413), as the error kinds table says
            assert _answer_head(sock).startswith(b"HTTP/1.1 413")
        assert server.client.get("/health", token=None).status == 200
    finally:
        for sock in busy:
            sock.close()
        server.stop()
