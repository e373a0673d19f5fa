"""The check every test ends with (tests/support/leaks.py): a socket left to the garbage
collector in a reference cycle is found by the next check, a closed one is not, and what
the check froze is still freed when it is no longer referenced."""

from __future__ import annotations

import socket
import weakref

import pytest

from tests.support.leaks import collect_leaks

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
