"""Find the threads a test left running: a running thread keeps its object referenced, so the
garbage-collector check (tests/support/leaks.py) never sees an unclosed repository whose
background thread still runs; it would go on working (and logging) after the test, the
servers it talks to stopped.

Project threads are told by name: every thread the project starts, and every worker of its
thread pools, is named `flowledger-...` (tests/test_thread_names.py checks the code). Library
threads (moto's server, py4j, s3transfer, uvicorn, ...) are not counted.

A thread alive before the test began is never reported: the fixtures of a higher scope
(module, session) are set up before the function-scoped autouse fixture that takes the
snapshot, so their threads are in it. Nor is a new worker of a pool whose workers were there
before (a module fixture's pool grows as it is used). A new thread is given a short grace to
end (the joins of all of them share `GRACE_S`), so a thread that is stopping is not a leak.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Collection
from concurrent.futures import thread as futures_thread

PREFIX = "flowledger-"
GRACE_S = 2.0


def _pool_of(thread: threading.Thread) -> object | None:
    """The executor a `ThreadPoolExecutor` worker works for (None: not a worker, or its
    executor is gone)."""
    if getattr(thread, "_target", None) is not futures_thread._worker:
        return None
    args = getattr(thread, "_args", ())
    return args[0]() if args else None  # the worker holds its executor by a weak reference


def threads_left(
    before: Collection[threading.Thread], grace_s: float = GRACE_S
) -> list[threading.Thread]:
    """The project's threads still alive that were not in `before` (the threads alive when
    the test began), each given its share of `grace_s` to end first."""
    pools = {id(p) for t in before if (p := _pool_of(t)) is not None}
    deadline = time.monotonic() + grace_s
    left = []
    for t in threading.enumerate():
        if t in before or not t.name.startswith(PREFIX):
            continue
        pool = _pool_of(t)
        if pool is not None and id(pool) in pools:
            continue  # a new worker of a pool that was there before the test
        t.join(max(0.0, deadline - time.monotonic()))
        if t.is_alive():
            left.append(t)
    return left


__all__ = ["GRACE_S", "PREFIX", "threads_left"]
