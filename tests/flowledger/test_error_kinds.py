"""An error's kind decides the answer: the same kind raised by different layers (storage,
content, timeline, archive, provenance, the service) exits the CLI with the same code and
answers the HTTP service with the same status, both taken from the one table."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn

from flowledger import cli
from flowledger.errors import ANSWERS, EXIT_UNKNOWN_OUTCOME
from flowledger.service import ServiceSettings, create_app
from flowledger.service.errors import (
    AnswerTooLarge,
    Busy,
    Forbidden,
    InvalidRequest,
    QueryTimeout,
    ServiceNotFound,
)
from flowledger.spark.errors import SparkWriteError
from provenance import errors as prov
from provenance.session import errors as session
from storage import ErrorKind
from storage import errors as st
from storage.content import errors as content
from tests.support.cli import run_cli, run_cli_process
from tests.support.service import TOKEN, Client, ServiceProcess, seed_lineage
from timeline import PropertiesError
from timeline import errors as tl
from timeline.archive import errors as arch

pytestmark = pytest.mark.unit

# Per kind, errors raised by at least two layers (and plain Python errors commands let through).
BY_KIND: dict[ErrorKind, list[BaseException]] = {
    ErrorKind.CONFLICT: [
        st.Conflict("put x: exists"),
        content.ContentConflict("ledger: lost"),
        tl.CommitConflict("instant 1 lost", winner="2"),
        arch.ArchiveConflict("manifest held"),
        prov.ProvenanceConflict("id block taken"),
    ],
    ErrorKind.UNKNOWN_OUTCOME: [
        st.UnknownOutcome("put x: may or may not"),
        content.ContentUnknownOutcome("ledger"),
        tl.CommitUnknownOutcome("commit of instant 1"),
        arch.ArchiveUnknownOutcome("manifest"),
        prov.ProvenanceUnknownOutcome("ingest"),
        session.SessionUnknownOutcome("journal"),
    ],
    ErrorKind.NOT_FOUND: [
        st.NotFound("get x: object not found"),
        st.BucketMissing("no bucket b"),
        content.ContentNotFound("claim gone"),
        content.translate(st.BucketMissing("no bucket b"), "read claim ledger"),
        tl.InstantNotFound("no instant 1"),
        tl.RangeNotReadable("archived", earliest="3"),
        prov.EventNotFound("no event 99"),
        prov.FlowFileNotFound("no events for FlowFile u"),
        ServiceNotFound("no table t"),
        FileNotFoundError(2, "No such file", "in.json"),
    ],
    ErrorKind.INVALID_INPUT: [
        st.InvalidKey("bad key"),
        content.InvalidClaim("offset -1"),
        tl.InvalidInstant("bad time"),
        tl.SchemaMismatch("column a", ["a"]),
        PropertiesError("no record key"),
        prov.InvalidEvent("SEND needs a transit URI"),
        session.FlowFileHandlingError("stale"),
        InvalidRequest("not UTF-8"),
        SparkWriteError("bad mode"),
        ValueError("not a number"),
    ],
    ErrorKind.INTEGRITY: [
        st.IntegrityError("checksum mismatch", "s3://b/k"),
        content.ContentIntegrityError("claim checksum", "s3://b/c"),
        tl.CorruptTimelineObject("instant 1: corrupt timeline object", "k"),
        arch.CorruptArchive("archive 1 corrupt", "k"),
        arch.MissingArchiveManifest("manifest gone", "k"),
        prov.MissingEvents("events 5-9 gone", "s3://b/j", ((5, 10),)),
    ],
    ErrorKind.UNAVAILABLE: [
        st.EndpointUnreachable("cannot reach S3 endpoint"),
        st.EndpointTimeout("read timed out"),
        st.BackendError("S3 error SlowDown"),
        content.translate(st.EndpointUnreachable("cannot reach"), "read claim ledger"),
        Busy("SQL slots busy"),
    ],
    ErrorKind.FORBIDDEN: [
        st.AccessDenied("check credentials"),
        prov.ReadOnlyQuery("only reads"),
        Forbidden("DROP is not allowed"),
        PermissionError(13, "Permission denied", "in.json"),
    ],
    ErrorKind.REFUSED: [
        st.UnsafeBackend("no conditional writes"),
        content.ClaimNotWritable("sealed"),
        tl.PlanError("nothing to clean"),
        prov.ReplayError("content gone"),
        prov.LineageError("too many FlowFiles"),
        session.SessionCommitError("rolled back"),
    ],
    ErrorKind.OVER_LIMIT: [AnswerTooLarge("over 32 MiB"), QueryTimeout("over 10 s")],
    ErrorKind.STORAGE_FULL: [
        st.StorageFull("no space left", "/repo"),
        content.ContainerFull("containers full"),
    ],
}
CASES = [(kind, i) for kind, errs in BY_KIND.items() for i in range(len(errs))]


def _case_id(case: tuple[ErrorKind, int]) -> str:
    kind, i = case
    return f"{kind.value}-{type(BY_KIND[kind][i]).__name__}"


# Kinds every layer can meet; the others belong to fewer layers (over limit: the service's).
SHARED = {
    ErrorKind.CONFLICT,
    ErrorKind.UNKNOWN_OUTCOME,
    ErrorKind.NOT_FOUND,
    ErrorKind.INVALID_INPUT,
    ErrorKind.INTEGRITY,
    ErrorKind.UNAVAILABLE,
    ErrorKind.FORBIDDEN,
    ErrorKind.REFUSED,
    ErrorKind.STORAGE_FULL,
}


def test_every_shared_kind_is_raised_from_at_least_two_layers() -> None:
    assert set(BY_KIND) == set(ErrorKind)
    for kind in SHARED:
        packages = {type(e).__module__.rsplit(".", 1)[0] for e in BY_KIND[kind]}
        assert len(packages) >= 2, (kind, packages)


def _cli_exit(
    exc: BaseException, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str]:
    """Run the real entry point (`flowledger.cli.main`) with a command that raises `exc`."""

    def command(*args: object, **kwargs: object) -> None:
        raise exc

    monkeypatch.setattr(cli, "app", command)
    code, _, err = run_cli(monkeypatch, capsys, "probe")
    return code, err


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_the_cli_exit_code_is_the_kind_s(
    case: tuple[ErrorKind, int],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    kind, i = case
    code, err = _cli_exit(BY_KIND[kind][i], monkeypatch, capsys)
    assert code == ANSWERS[kind].exit_code, (kind, err)
    assert err.count("\n") == 1 and err.startswith("flowledger: error: "), err
    # A write that may have landed is never reported like one that failed (docs/faults.md).
    assert err.startswith("flowledger: error: unknown outcome: ") == (code == EXIT_UNKNOWN_OUTCOME)


def test_a_bug_is_not_a_kind(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _cli_exit(KeyError("x"), monkeypatch, capsys)
    assert code == 70 and err.startswith("flowledger: internal error: "), err


class _Server:
    """The service app (its real error handlers) on a real uvicorn server, with one more
    route that raises the error a test names."""

    def __init__(self, repo: str) -> None:
        app = create_app(repo, ServiceSettings(token=TOKEN))

        def probe(kind: str, index: int) -> None:
            raise BY_KIND[ErrorKind(kind)][index]

        app.add_api_route("/probe/{kind}/{index}", probe, methods=["GET"])
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(app, log_level="critical", lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]})
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the service did not start")
            time.sleep(0.02)
        self.client = Client("127.0.0.1", self.port)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    server = _Server(str(tmp_path_factory.mktemp("kinds") / "repo"))
    yield server.client
    server.stop()


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_the_http_status_is_the_kind_s(case: tuple[ErrorKind, int], service: Client) -> None:
    kind, i = case
    r = service.get(f"/probe/{kind.value}/{i}")
    assert r.status == ANSWERS[kind].http_status, (kind, r.status, r.body)
    detail = r.json()["detail"]
    # Every kind's message reaches the caller (only a bug's stays in the server log).
    assert detail == " ".join(str(BY_KIND[kind][i]).split()), detail
    if kind is ErrorKind.UNAVAILABLE and isinstance(BY_KIND[kind][i], Busy):
        assert r.headers.get("retry-after") == "1"


def test_a_bug_answers_500_without_its_text(service: Client) -> None:
    r = service.get("/probe/none/0")  # not a kind: the probe itself fails (ValueError: 400)
    assert r.status == 400
    r = service.get("/probe/conflict/999")  # IndexError in the probe: a bug
    assert r.status == 500 and r.json()["detail"] == "internal error (see the server log)"


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Client]]:
    """A repository with a small lineage, served by a real `flowledger serve` process."""
    repo = str(tmp_path_factory.mktemp("seeded") / "repo")
    seed_lineage(repo)
    server = ServiceProcess(repo)
    yield repo, server.client
    server.stop()


_flowledger = run_cli_process


def test_real_commands_and_requests_answer_by_kind(
    seeded: tuple[str, Client], tmp_path: Path
) -> None:
    """The same kind raised for real by different layers: the CLI's exit code and the
    service's status are the table's, whichever layer raised it."""
    repo, api = seeded
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"event_type": "SEND"}\n')
    out = tmp_path / "out.bin"
    cli_cases = [
        # not found: provenance (EventNotFound), the application (no table at that URI)
        (ErrorKind.NOT_FOUND, ("provenance", "replay", "99", "--repo", repo)),
        (ErrorKind.NOT_FOUND, ("timeline", "show", "--table", f"{repo}/tables/nope")),
        # invalid input: provenance (InvalidEvent), the content claim parser (ValueError)
        (ErrorKind.INVALID_INPUT, ("provenance", "ingest", str(bad), "--repo", repo)),
        (ErrorKind.INVALID_INPUT, ("content", "get", "{}", "-o", str(out), "--repo", repo)),
        # refused: a replay of an event without content (ReplayError)
        (ErrorKind.REFUSED, ("provenance", "replay", "1", "--repo", repo)),
    ]
    for kind, args in cli_cases:
        res = _flowledger(*args)
        assert res.returncode == ANSWERS[kind].exit_code, (args, res.returncode, res.stderr)
        assert res.stderr.count("\n") == 1, res.stderr
    http_cases = [
        (ErrorKind.NOT_FOUND, api.get("/nifi-api/provenance-events/99")),  # EventNotFound
        (ErrorKind.NOT_FOUND, api.get("/tables/nope/timeline")),  # the service's own
        (ErrorKind.INVALID_INPUT, api.post("/provenance/events", raw=bad.read_bytes())),
        (ErrorKind.INVALID_INPUT, api.post("/sql", {"sql": "SELEC 1"})),  # the service's own
        (ErrorKind.REFUSED, api.post("/nifi-api/provenance-events/replays", {"eventId": 1})),
    ]
    for kind, r in http_cases:
        assert r.status == ANSWERS[kind].http_status, (kind, r.status, r.body)
