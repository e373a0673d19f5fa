"""Durable registration that does not make the caller wait for its own batch.

`register_events(..., sync=True)` returns once the batch is on disk (or in the store), so a
single-threaded producer builds batch N+1 only after batch N's journal block was encoded and
written: the encode and the `fdatasync` sit on its time. `repo.pipelined()` hands each batch to
one writer thread instead and returns a future at once; the future resolves with the batch's
event ids when the batch is durable, exactly as the synchronous call would have returned them
(the same journal write, the same crash safety: an event is acknowledged only when its future
resolved). Validation and conversion to Arrow stay on the caller's thread, so a malformed event
is refused by the call itself, before anything is queued. One writer thread keeps batches in
the order they were registered; at most `depth` batches wait, so a slow store holds the caller
back instead of growing memory.

This is NiFi's provenance repository contract (events are acknowledged after the write
completes) with the producer's next batch overlapping the write, the group commit across calls
of one producer.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pyarrow as pa

from .errors import PipelineClosed
from .event import ProvenanceEvent

EventsIn = Iterable[ProvenanceEvent | Mapping[str, Any]]


class PipelinedRegistration:
    """Durable registration whose calls return futures (see the module doc). Use as a
    context manager: leaving it waits until every batch is durable and raises the first
    failure, if any."""

    def __init__(
        self,
        append: Callable[[pa.Table], list[int]],
        convert: Callable[[EventsIn], pa.Table],
        conform: Callable[[pa.Table], pa.Table],
        depth: int = 2,
    ) -> None:
        if depth < 1:
            raise ValueError("depth must be >= 1")
        self._append, self._convert, self._conform = append, convert, conform
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="provenance-durable")
        self._slots = threading.BoundedSemaphore(depth)
        self._pending: list[Future[list[int]]] = []
        self._failure: BaseException | None = None
        self._closed = False

    def register_events(self, events: EventsIn) -> Future[list[int]]:
        """Validate and convert `events` now (a bad event raises here, nothing queued),
        write them durably on the writer thread; the future holds their ids."""
        return self._submit(self._convert(events))

    def register_table(self, table: pa.Table) -> Future[list[int]]:
        """The columnar path: a pyarrow Table with the view's column names."""
        return self._submit(self._conform(table))

    def _submit(self, table: pa.Table) -> Future[list[int]]:
        self._check_open()
        self._slots.acquire()  # at most `depth` batches in flight: back-pressure
        try:
            self._check_open()  # a batch may have failed while this call waited
            fut = self._pool.submit(self._append, table)
        except BaseException:
            self._slots.release()
            raise
        fut.add_done_callback(self._done)
        self._pending = [f for f in self._pending if not f.done()]
        self._pending.append(fut)
        return fut

    def _done(self, fut: Future[list[int]]) -> None:
        exc = fut.exception()
        if exc is not None and self._failure is None:
            self._failure = exc
        self._slots.release()

    def _check_open(self) -> None:
        if self._failure is not None:
            raise PipelineClosed(
                f"an earlier batch was not written ({self._failure}); batches after it are "
                "refused so that none lands out of order: register them again"
            ) from self._failure
        if self._closed:
            raise PipelineClosed("the pipelined registration is closed")

    def wait(self) -> None:
        """Block until every registered batch is durable; raise the first failure."""
        for fut in list(self._pending):
            fut.exception()  # waits
        self._pending = []
        if self._failure is not None:
            raise self._failure

    def close(self) -> None:
        """Wait for every batch, stop the writer thread, raise the first failure."""
        if self._closed:
            return
        try:
            self.wait()
        finally:
            self._closed = True
            self._pool.shutdown(wait=True)

    def __enter__(self) -> PipelinedRegistration:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["PipelinedRegistration"]
