"""Admission of `POST /sql`: its own threads, a bounded wait, a bounded queue.

SQL never runs on the thread pool that serves the other routes (event lookups, content,
timelines): a burst of slow queries would hold every one of those threads and lookups would
queue behind them. Here at most `concurrency` queries run, on threads of their own; up to
`queue_size` more wait on the event loop (holding no thread) for at most `queue_timeout_s`;
anything beyond is refused at once (503 with Retry-After).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from .errors import Busy

T = TypeVar("T")


class SqlSlots:
    def __init__(self, concurrency: int, queue_size: int, queue_timeout_s: float) -> None:
        self.concurrency = concurrency
        self.queue_size = queue_size
        self.queue_timeout_s = queue_timeout_s
        self._pool = ThreadPoolExecutor(concurrency, thread_name_prefix="flowledger-sql")
        self._slots: asyncio.Semaphore | None = None
        self._admitted = 0  # running + waiting; only touched on the event loop

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    async def run(self, fn: Callable[..., T], *args: object) -> T:
        """`fn(*args)` on an SQL thread once a slot is free; Busy when none frees in time or
        too many requests already wait."""
        if self._admitted >= self.concurrency + self.queue_size:
            raise Busy(
                f"{self._admitted} SQL queries are running or waiting (sql_concurrency "
                f"{self.concurrency}, sql_queue_size {self.queue_size}): retry later"
            )
        if self._slots is None:  # created on the serving loop
            self._slots = asyncio.Semaphore(self.concurrency)
        slots = self._slots
        self._admitted += 1
        try:
            try:
                await asyncio.wait_for(slots.acquire(), self.queue_timeout_s)
            except TimeoutError:
                raise Busy(
                    f"{self.concurrency} SQL queries are already running and none finished "
                    f"within {self.queue_timeout_s:g} s (sql_queue_timeout_s): retry later"
                ) from None
            loop = asyncio.get_running_loop()
            job = self._pool.submit(fn, *args)
            # The slot is the thread: free it when the thread is done, even when this request
            # was cancelled (client gone) while the query still runs.
            job.add_done_callback(lambda _: _call_soon(loop, slots.release))
            return await asyncio.wrap_future(job)
        finally:
            self._admitted -= 1


def _call_soon(loop: asyncio.AbstractEventLoop, fn: Callable[[], object]) -> None:
    # RuntimeError: the loop is closed; the server is gone, and the slot with it.
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(fn)
