"""The check every test ends with (tests/support/leaks.py): a socket left to the garbage
collector in a reference cycle is found by the next check, a closed one is not, and what
the check froze is still freed when it is no longer referenced; the fixtures' waits on a
starting server leave no socket behind."""

from __future__ import annotations

import socket
import threading
import weakref
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from unittest import mock

import pytest

from tests.support import spark_cluster
from tests.support.leaks import collect_leaks
from tests.support.spark_cluster import Cluster

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
