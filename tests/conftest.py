"""Test tiers and the servers they run against.

Tiers are pytest markers: unit (local filesystem), s3 (moto's threaded HTTP server), minio
(a real MinIO built from its Go module), spark, faults (fault injection in front of MinIO).
`FLOWLEDGER_REQUIRE_TIERS=unit,s3,minio,...` (set by `make test` and CI) turns a skipped test
or an empty tier into a failed run.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from storage import ObjectStore, StoreSettings, capability, open_store
from tests.support.backends import ALL_BACKENDS, LOCAL_AND_MINIO, Backend, make_backend
from tests.support.cli import Cli
from tests.support.fault_proxy import FaultProxy
from tests.support.faults import proxy_for
from tests.support.leaks import collect_leaks, release_frozen
from tests.support.servers import MotoServer, S3Endpoint
from tests.support.thread_leaks import threads_left
from tests.support.tiers import TIERS, required_tiers, unavailable

# Fixtures only: tests never import this module. Shared helpers live in tests/support/.


def _isolate_from_machine() -> None:
    """Never read the machine's AWS profile, credentials or instance metadata."""
    for name in list(os.environ):
        if name.startswith("AWS_") or name == "FLOWLEDGER_REPO":
            del os.environ[name]
    empty = os.path.join(tempfile.gettempdir(), "flowledger-no-aws-config")
    os.environ["AWS_CONFIG_FILE"] = empty
    os.environ["AWS_SHARED_CREDENTIALS_FILE"] = empty
    os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
    # This run's own temp folder, removed when the run ends: a machine that runs the suite
    # often must not fill its disk (MinIO refuses writes below its free-space threshold).
    run_dir = tempfile.mkdtemp(prefix="flowledger-tests-")
    atexit.register(shutil.rmtree, run_dir, ignore_errors=True)
    # Timeline entries cached on disk (timeline/entry_cache.py) stay in it.
    os.environ["FLOWLEDGER_TIMELINE_CACHE"] = os.path.join(run_dir, "entries")
    # Provenance of writes that name no repository (Spark sessions built without
    # `spark.flowledger.repo`) goes to it too, not ./flowledger-data, where `make demo` would
    # show the tests' jobs.
    os.environ["FLOWLEDGER_REPO"] = os.path.join(run_dir, "repo")
    for name in ("FLOWLEDGER_TIMELINE_CACHE", "FLOWLEDGER_REPO"):
        os.makedirs(os.environ[name])


_isolate_from_machine()
logging.getLogger("werkzeug").setLevel(logging.WARNING)  # moto's per-request log lines


# -- leaks -------------------------------------------------------------------------------------
@pytest.fixture(autouse=True)
def _closes_what_it_opens(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fails the test that left a socket or file to be closed by the garbage collector, or a
    project thread running (after its own fixtures closed theirs: autouse fixtures are torn
    down last; the threads of module and session fixtures are there before the snapshot,
    higher scopes being set up first)."""
    before = set(threading.enumerate())
    spark = request.getfixturevalue("spark") if "spark" in request.fixturenames else None
    yield
    if spark is not None:
        _close_kept_provenance(spark)
    leaked = collect_leaks()  # first: a pool collected with its owner stops its workers
    running = threads_left(before)  # tests/support/thread_leaks.py
    problems = []
    if leaked:
        problems.append(
            f"left {len(leaked)} resource(s) unclosed, e.g. {leaked[0]} (close the stores "
            "and files the test opens: `contextlib.closing(open_store(...))`, a fixture)"
        )
    if running:
        names = ", ".join(sorted(t.name for t in running))
        problems.append(
            f"left {len(running)} thread(s) running: {names} (close the repositories, tables "
            "and stores the test opens: `with`, `contextlib.closing(...)`, a fixture)"
        )
    if problems:
        pytest.fail("; ".join(problems), pytrace=False)


# -- tier enforcement --------------------------------------------------------------------------
_ran: Counter[str] = Counter()
_skipped: list[str] = []


#: The test modules that parse every module with `ast` (run first, see below).
AST_CHECKS = ("tests/test_architecture.py", "tests/test_thread_names.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if not any(item.get_closest_marker(t) for t in TIERS):
            raise pytest.UsageError(f"{item.nodeid} has no tier marker ({', '.join(TIERS)})")
    # The architecture checks parse every module with `ast`: run them first, in a fresh
    # interpreter state. CPython 3.11's `ast` can fail ("AST constructor recursion depth
    # mismatch") once any earlier ast call in the process hit a RecursionError, which
    # libraries do deep inside other tests' stacks.
    items.sort(key=lambda item: not item.nodeid.startswith(AST_CHECKS))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    tiers = [t for t in TIERS if t in report.keywords]
    if report.skipped:
        _skipped.append(report.nodeid)
    elif report.when == "call":
        for t in tiers:
            _ran[t] += 1


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    release_frozen()  # tests/support/leaks.py
    required = required_tiers()
    if not required:
        return
    problems = [f"tier {t!r} ran no test" for t in sorted(required) if _ran[t] == 0]
    problems += [f"skipped: {n}" for n in _skipped]
    if problems:
        print("\nFLOWLEDGER_REQUIRE_TIERS failed:\n  " + "\n  ".join(problems))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


# -- servers -----------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def moto_server() -> Iterator[MotoServer]:
    server = MotoServer()
    yield server
    server.stop()


@pytest.fixture
def moto(moto_server: MotoServer) -> S3Endpoint:
    """moto's server, reset for this test."""
    moto_server.reset()
    capability.forget()
    return moto_server.endpoint


@pytest.fixture(scope="session")
def minio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Endpoint]:
    from infra import minio as infra_minio

    if not infra_minio.binary_path().exists():
        unavailable(
            "minio", f"no MinIO binary at {infra_minio.binary_path()}; run `make minio-build`"
        )
    server = infra_minio.start(tmp_path_factory.mktemp("minio"))
    yield S3Endpoint("minio", server.endpoint, server.access_key, server.secret_key, server.region)
    infra_minio.stop(server)


@pytest.fixture(scope="session")
def spark(minio: S3Endpoint) -> Iterator[Any]:
    """A local PySpark session whose s3a filesystem points at the test MinIO."""
    try:
        from pyspark.sql import SparkSession

        from infra import spark as infra_spark

        jars = infra_spark.jar_paths()
    except Exception as exc:  # pyspark or the s3a jars missing
        unavailable("spark", f"{exc}; run `make spark-jars`")
    from storage.s3a import s3a_conf

    os.environ["PYSPARK_PYTHON"] = sys.executable  # workers need flowledger's venv
    builder = (
        SparkSession.builder.master("local[2]")
        .appName("flowledger-tests")
        .config("spark.jars", ",".join(str(j) for j in jars))
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", "2g")
        .config("spark.pyspark.python", sys.executable)
        # Every test input is small: keyed writes run as jobs here, so that the tasks' path
        # is the one tested; writes on the driver have tests of their own.
        .config("spark.flowledger.keyed.driverWriteThreshold", "-1")
    )
    for key, value in s3a_conf(minio.settings()).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def _close_kept_provenance(session: Any) -> None:
    """Close the provenance repositories the session's installed hook keeps open between
    commits (flowledger/spark/lineage.py; their pools' threads). The shared session outlives
    the test, the repositories its writes opened are the test's: it records on, reopening
    them."""
    from flowledger.spark import commit_hooks
    from flowledger.spark.lineage import ProvenanceHook

    for hook in commit_hooks(session):
        if isinstance(hook, ProvenanceHook):
            hook.close()


# -- stores on every backend -------------------------------------------------------------------
@pytest.fixture(params=ALL_BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    """A fresh repository on the local backend, moto's server or MinIO."""
    return make_backend(request, tmp_path, request.param)


@pytest.fixture(params=LOCAL_AND_MINIO)
def tbackend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    """A fresh repository on the local backend or MinIO (where moto adds little)."""
    return make_backend(request, tmp_path, request.param)


@pytest.fixture
def store(backend: Backend) -> Iterator[ObjectStore]:
    s = backend.open()
    yield s
    s.close()


@pytest.fixture
def make_store(backend: Backend) -> Callable[..., ObjectStore]:
    return backend.open


@pytest.fixture
def opened() -> Iterator[Callable[..., ObjectStore]]:
    """`opened(uri, settings=None)`: `open_store`, the store closed when the test ends."""
    stores: list[ObjectStore] = []

    def open_(uri: str, settings: StoreSettings | None = None) -> ObjectStore:
        store = open_store(uri, settings)
        stores.append(store)
        return store

    yield open_
    for store in stores:
        store.close()


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Cli:
    """`cli(*args)`: (exit code, stdout, stderr) of `flowledger ARGS...` run in process."""
    return Cli(monkeypatch, capsys)


@pytest.fixture
def proxy(minio: S3Endpoint) -> Iterator[FaultProxy]:
    """A fault-injecting TCP proxy in front of the session's MinIO (the faults tier's tests
    set its rules; tests/support/faults.py)."""
    p = proxy_for(minio)
    yield p
    p.stop()
