"""The check every test ends with (tests/support/leaks.py): a socket left to the garbage
collector in a reference cycle is found by the next check, a closed one is not, and what
the check froze is still freed when it is no longer referenced; the fixtures' waits on a
starting server leave no socket behind. The thread check (tests/support/thread_leaks.py): a
project thread a test left running is found, one that ends within the grace, a library's or
one that was there before is not, nor the threads of a module fixture the test set up."""

from __future__ import annotations

import socket
import threading
import weakref
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from unittest import mock

import pytest

from tests.support import spark_cluster
from tests.support.leaks import collect_leaks
from tests.support.spark_cluster import Cluster
from tests.support.thread_leaks import threads_left

pytestmark = pytest.mark.unit


class _Holder:
    """An object in a reference cycle (as a boto3 client is), holding a socket."""

    def __init__(self, sock: socket.socket) -> None:
        self.me: _Holder | None = self
        self.sock = sock


def test_a_socket_left_in_a_cycle_is_found_and_a_closed_one_is_not() -> None:
    collect_leaks()  # what came before is not this test's
    _Holder(socket.socket())
    leaked = collect_leaks()
    assert len(leaked) == 1 and leaked[0].startswith("unclosed <socket.socket"), leaked
    closed = _Holder(socket.socket())
    closed.sock.close()
    del closed
    assert collect_leaks() == []


def test_what_a_check_froze_is_freed_by_reference_counting() -> None:
    held = _Holder(socket.socket())
    held.me = None  # no cycle: freed as soon as it is unreferenced
    gone = weakref.ref(held)
    collect_leaks()  # frozen: out of the collector's sight
    held.sock.close()
    del held
    assert gone() is None


def test_waiting_on_a_ui_that_answers_errors_while_it_starts_leaves_no_socket(
    tmp_path: Path,
) -> None:
    """The standalone cluster's start waits on its web UI, which answers errors until it is
    up: each error holds its response's socket, closed by the wait, not left to the
    collector (which would fail whichever test it next ran in)."""
    answers = iter([503, 503, 200])

    class _Starting(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            status = next(answers)
            body = b'{"workers": []}' if status == 200 else b"starting"
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Starting)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        collect_leaks()  # what came before is not this test's
        ui = f"http://127.0.0.1:{server.server_address[1]}"
        cluster = Cluster("spark://127.0.0.1:1", ui, tmp_path)
        with mock.patch.object(spark_cluster.time, "sleep"):
            spark_cluster._wait(cluster, lambda: cluster.alive_workers() >= 0)
        assert next(answers, None) is None  # both errors were answered and waited past
        assert collect_leaks() == []
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _waiting(name: str) -> tuple[threading.Thread, threading.Event]:
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait, name=name, daemon=True)
    thread.start()
    return thread, stop


def test_a_project_thread_left_running_is_found() -> None:
    before = set(threading.enumerate())
    thread, stop = _waiting("flowledger-test-left")
    try:
        assert threads_left(before, grace_s=0.1) == [thread]
    finally:
        stop.set()
        thread.join()


def test_a_thread_that_ends_within_the_grace_is_not() -> None:
    before = set(threading.enumerate())
    thread, stop = _waiting("flowledger-test-ending")
    threading.Timer(0.2, stop.set).start()
    assert threads_left(before, grace_s=5) == []
    assert not thread.is_alive()


def test_a_library_thread_is_not() -> None:
    before = set(threading.enumerate())
    thread, stop = _waiting("Thread-7 (serve_forever)")
    try:
        assert threads_left(before, grace_s=0.1) == []
    finally:
        stop.set()
        thread.join()


def test_a_thread_that_was_there_before_is_not() -> None:
    thread, stop = _waiting("flowledger-test-before")
    try:
        assert threads_left(set(threading.enumerate()), grace_s=0.1) == []
    finally:
        stop.set()
        thread.join()


def test_a_pool_left_open_is_found_a_shut_one_and_an_older_ones_new_worker_are_not() -> None:
    older = ThreadPoolExecutor(2, "flowledger-test-older")
    try:
        older.submit(time_sleep, 0.2)  # its first worker
        before = set(threading.enumerate())
        older.submit(time_sleep, 0.2)  # a second worker, while the first is busy
        with ThreadPoolExecutor(2, "flowledger-test-shut") as shut:
            shut.submit(time_sleep, 0)
        left_open = ThreadPoolExecutor(2, "flowledger-test-open")
        left_open.submit(time_sleep, 0).result()
        found = threads_left(before, grace_s=0.1)
        assert [t.name for t in found] == ["flowledger-test-open_0"]
        left_open.shutdown()
    finally:
        older.shutdown()


def time_sleep(seconds: float) -> None:
    threading.Event().wait(seconds)


@pytest.fixture(scope="module")
def module_thread() -> Iterator[threading.Thread]:
    """A module fixture whose thread lives until the module's tests are done."""
    thread, stop = _waiting("flowledger-test-module-fixture")
    yield thread
    stop.set()
    thread.join()


@pytest.fixture
def through_a_function_fixture(module_thread: threading.Thread) -> threading.Thread:
    return module_thread


def test_a_module_fixture_set_up_for_this_test_is_there_before_the_snapshot(
    through_a_function_fixture: threading.Thread,
) -> None:
    """pytest sets up higher scopes first, before the autouse function-scoped check takes
    its snapshot: this test, the first to use the fixture, passes its teardown check."""
    assert through_a_function_fixture.is_alive()
    assert through_a_function_fixture.name.startswith("flowledger-")
