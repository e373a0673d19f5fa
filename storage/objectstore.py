"""The object-store interface every backend implements, and the values it passes around."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import BinaryIO

from .append_log import AppendLog
from .keys import validate_key, validate_prefix
from .lifecycle import Finishing
from .upload_buffers import MemoryRoom

COPY_CHUNK = 1024 * 1024


@dataclass(frozen=True)
class ObjectInfo:
    key: str
    size: int
    etag: str
    last_modified: datetime | None = None


@dataclass(frozen=True)
class ListPage:
    objects: tuple[ObjectInfo, ...]
    #: Pass as `start_after` to get the next page; None when this was the last page.
    next_start_after: str | None


@dataclass(frozen=True)
class ByteRange:
    """A slice of an existing object, a source for `compose`. length None = to the end."""

    key: str
    start: int = 0
    length: int | None = None


class RequestStats:
    """Counts requests by kind, so benchmarks and tests can show what an operation costs."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()

    def add(self, op: str, n: int = 1) -> None:
        with self._lock:
            self._counts[op] += n

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)

    def total(self) -> int:
        with self._lock:
            return sum(self._counts.values())

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()


class ObjectWriter(Finishing, ABC):
    """A streaming upload. Memory stays bounded whatever the object size.

    Use as a context manager: the object is committed on a clean exit and aborted (nothing
    visible) on an exception.
    """

    @abstractmethod
    def write(self, data: bytes | bytearray | memoryview) -> int: ...

    @abstractmethod
    def commit(self) -> ObjectInfo:
        """Make the object visible, atomically. Raises Conflict for a lost create-only."""

    @abstractmethod
    def abort(self) -> None: ...

    def write_from(self, stream: BinaryIO, chunk: int = COPY_CHUNK) -> int:
        total = 0
        while block := stream.read(chunk):
            total += self.write(block)
        return total

    def exit_ok(self) -> None:
        self.commit()

    def exit_failed(self) -> None:
        self.abort()


class ObjectStore(ABC):
    """An object store rooted at a repository URI; keys are relative to that root.

    Conditional writes are the only synchronisation primitive: `put_if_absent` (If-None-Match)
    and `put_if_match` (If-Match). A conditional write retried after a lost response is
    resolved by reading back and comparing bytes, so callers that need ownership must write
    bodies that are unique to the writer (a writer id, a nonce).
    """

    uri: str
    stats: RequestStats

    def url(self, key: str = "") -> str:
        return self.uri.rstrip("/") + ("/" + key if key else "")

    @property
    def identity(self) -> str:
        """Names this store's root uniquely on this machine (S3: also the endpoint, since two
        servers may hold the same bucket name); keys for local caches."""
        return self.uri

    def _key(self, key: str) -> str:
        return validate_key(key, self._root_prefix())

    def _root_prefix(self) -> str:
        return ""

    # -- writes -----------------------------------------------------------------------------
    @abstractmethod
    def put(self, key: str, data: bytes) -> ObjectInfo:
        """Unconditional write (last writer wins). Use only for keys nobody else writes."""

    @abstractmethod
    def put_if_absent(self, key: str, data: bytes) -> ObjectInfo:
        """Create-only write. Raises Conflict if the key exists."""

    @abstractmethod
    def put_if_match(self, key: str, data: bytes, etag: str, *, durable: bool = True) -> ObjectInfo:
        """Compare-and-swap. Raises Conflict if the object is missing or its etag differs.

        `durable=False`: the caller can rebuild the object after a machine crash, so the
        write may be lost with it (the local backend skips its fsyncs; an S3 write is durable
        when acknowledged anyway). Atomicity and the etag check are unchanged."""

    @abstractmethod
    def open_writer(
        self, key: str, *, if_none_match: bool = False, memory: MemoryRoom | None = None
    ) -> ObjectWriter:
        """A streaming (multipart) upload with bounded memory. `memory`: the most bytes of
        parts the store's uploads may hold in memory as the caller sees it, asked as a part
        fills; it tightens the store's `fast_upload_buffer_memory`, and past it the part
        waits on disk (storage/upload_buffers.py). The local backend writes straight to a
        file and holds no parts."""

    def upload_stream(
        self, key: str, stream: BinaryIO, *, if_none_match: bool = False
    ) -> ObjectInfo:
        writer = self.open_writer(key, if_none_match=if_none_match)
        try:
            writer.write_from(stream)
        except BaseException:
            writer.abort()
            raise
        return writer.commit()

    @abstractmethod
    def compose(
        self, key: str, sources: Sequence[ByteRange], *, if_none_match: bool = False
    ) -> ObjectInfo:
        """Write the concatenation of `sources` as `key`, server-side where the backend can."""

    def open_append_log(self, key: str) -> AppendLog | None:
        """A new append-only log at `key` (create-only; storage/append_log.py), or None where
        the backend cannot append (object stores: the caller writes one object per write)."""
        return None

    def delete_idle_log(self, key: str) -> bool:
        """Delete the append log at `key` unless a writer still appends to it; True if gone."""
        self.delete(key)
        return True

    # -- reads ------------------------------------------------------------------------------
    @abstractmethod
    def get(self, key: str, start: int = 0, length: int | None = None) -> bytes:
        """Read bytes [start, start+length) (to the end if length is None)."""

    @abstractmethod
    def get_object(self, key: str) -> tuple[bytes, ObjectInfo]:
        """Read the whole object with its etag (for read-modify-CAS)."""

    @abstractmethod
    def open_read(self, key: str, start: int = 0, length: int | None = None) -> BinaryIO:
        """A stream over a byte range, for contents too big for memory."""

    @abstractmethod
    def head(self, key: str) -> ObjectInfo: ...

    def exists(self, key: str) -> bool:
        from .errors import NotFound

        try:
            self.head(key)
        except NotFound:
            return False
        return True

    def folder_version(self, folder: str) -> str | None:
        """A token of the key names directly in `folder` (ending in "/"), cheaper than a
        listing, or None when the backend cannot give one (object stores). Equal tokens mean
        the same names; for a folder of create-only keys (which never change once written)
        that means the same objects, so an earlier listing of the folder may be reused. An
        overwritten key keeps the token: do not use it for folders of overwritten keys.
        Tokens compare within one process only."""
        return None

    @abstractmethod
    def list_page(
        self, prefix: str = "", start_after: str | None = None, max_keys: int = 1000
    ) -> ListPage:
        """One page of keys under `prefix`, in UTF-8 byte order, strictly after `start_after`."""

    def list(self, prefix: str = "", start_after: str | None = None) -> Iterator[ObjectInfo]:
        """Every key under `prefix` after `start_after`, paging as needed."""
        validate_prefix(prefix)
        cursor = start_after
        while True:
            page = self.list_page(prefix, cursor)
            yield from page.objects
            if page.next_start_after is None:
                return
            cursor = page.next_start_after

    # -- deletes ----------------------------------------------------------------------------
    @abstractmethod
    def delete(self, key: str) -> None:
        """Delete if present (deleting a missing key is not an error)."""

    @abstractmethod
    def delete_many(self, keys: Iterable[str]) -> None:
        """Delete many keys, in batches of at most 1,000 per request."""

    # -- scoping ----------------------------------------------------------------------------
    @abstractmethod
    def scoped(self, prefix: str) -> ObjectStore:
        """A view of this store rooted at `prefix` (same connection and stats)."""

    def abort_stale_uploads(self, older_than: float | None = None) -> int:
        """Remove what writers that died mid-write left behind under this store's prefix
        (S3: incomplete multipart uploads; local: temp files), if started more than
        `older_than` seconds ago (default: settings `multipart_purge_age`). Returns how many."""
        return 0

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections; the default has nothing to release."""
