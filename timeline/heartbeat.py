"""Heartbeats of running instants: an object refreshed by a thread while the instant is pending.

A short write never writes one: the state objects' own modification times count as the first
beats, so the happy path costs no request. Others decide a write failed when neither its
state objects nor its heartbeat were touched for `interval * (tolerable_misses + 1)`.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

from storage import NotFound, ObjectStore, StorageError

from .layout import heartbeat_key


def heartbeat_body(writer: str, now: float | None = None) -> bytes:
    """What a heartbeat object holds: the writer's id and the beat's time (seconds since the
    epoch). Readers go by the object's modification time; the body is for people."""
    return f"{writer} {time.time() if now is None else now:.3f}".encode()


def beat(store: ObjectStore, instant_time: str, writer: str) -> None:
    """Write one heartbeat of a pending instant (any process working for it may)."""
    store.put(heartbeat_key(instant_time), heartbeat_body(writer))


class Heartbeat:
    def __init__(self, store: ObjectStore, instant_time: str, writer: str, interval_s: float):
        self.store = store
        self.key = heartbeat_key(instant_time)
        self.instant_time = instant_time
        self.writer = writer
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._wrote = False
        self._thread = threading.Thread(
            target=self._run, name=f"flowledger-heartbeat-{instant_time}", daemon=True
        )

    def start(self) -> Heartbeat:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                beat(self.store, self.instant_time, self.writer)
                self._wrote = True
            except StorageError:
                continue  # the next beat may get through; missing a few is tolerated

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()
        if self._wrote:
            self.store.delete(self.key)


def last_beat(store: ObjectStore, instant_time: str) -> datetime | None:
    try:
        return store.head(heartbeat_key(instant_time)).last_modified
    except NotFound:
        return None


#: S3 reports Last-Modified in whole seconds: a beat may look up to this much older.
MTIME_RESOLUTION_S = 1.0


def expired(last_touched: datetime | None, expiry_s: float, now: datetime | None = None) -> bool:
    if last_touched is None:
        return True
    now = now or datetime.now(UTC)
    if last_touched.tzinfo is None:
        last_touched = last_touched.replace(tzinfo=UTC)
    return (now - last_touched).total_seconds() > expiry_s + MTIME_RESOLUTION_S
