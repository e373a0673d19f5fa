"""Reading contents: one ranged GET, checked against the claim's length and checksum."""

from __future__ import annotations

import io
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import BinaryIO, cast

from ..errors import NotFound, RangeNotSatisfiable, StorageError
from ..objectstore import ObjectStore
from . import checksum
from .claims import ContentClaim
from .errors import ContentIntegrityError, ContentNotFound, translate


def _check(claim: ContentClaim, url: str, length: int, crc: int) -> None:
    if length < claim.length:
        raise ContentIntegrityError(
            f"content {claim} in {url} is truncated: {length} of {claim.length} bytes present"
        )
    if claim.checksum and checksum.format_checksum(crc) != claim.checksum:
        raise ContentIntegrityError(
            f"content {claim} in {url} is corrupt: checksum "
            f"{checksum.format_checksum(crc)} != {claim.checksum}"
        )


def _missing(claim: ContentClaim, url: str, exc: StorageError) -> ContentNotFound:
    if isinstance(exc, RangeNotSatisfiable):
        return ContentNotFound(
            f"content {claim} not found: offset {claim.offset} is past the end of {url}"
        )
    return ContentNotFound(
        f"content {claim} not found: {url} does not exist (destroyed, or never committed)"
    )


def verify_bytes(claim: ContentClaim, url: str, data: bytes) -> bytes:
    _check(claim, url, len(data), checksum.update(0, data))
    return data


def read_bytes(store: ObjectStore, claim: ContentClaim) -> bytes:
    """The whole content, verified before it is returned."""
    url = store.url(claim.resource_claim.key)
    if claim.length == 0:
        return b""
    try:
        data = store.get(claim.resource_claim.key, claim.offset, claim.length)
    except (NotFound, RangeNotSatisfiable) as exc:
        raise _missing(claim, url, exc) from exc
    except StorageError as exc:
        raise translate(exc, f"read content {claim}") from exc
    return verify_bytes(claim, url, data)


class ParallelReader(io.RawIOBase):
    """A large content read as consecutive ranged GETs, `ahead` of them in flight (like the
    transfer manager's download, but in order and bounded), checked against the claim's length
    and checksum; the last read raises if they differ.

    Parts land in `ahead + 1` buffers allocated once and reused: allocating a fresh buffer per
    part leaves freed ones in glibc's per-thread arenas, and RSS then grows with the threads.
    Each part's CRC-32 is computed by the thread that fetched it (zlib releases the GIL) and
    joined in order by the consumer: checksumming in the consumer alone capped a download at
    one core's CRC-32 rate, below boto3's transfer manager (which verifies nothing).
    """

    CHUNK = 256 * 1024

    def __init__(
        self, store: ObjectStore, claim: ContentClaim, url: str, part: int, ahead: int
    ) -> None:
        self._store = store
        self._claim = claim
        self._url = url
        self._key = claim.resource_claim.key
        self._part = min(part, max(1, claim.length))
        self._ahead = ahead
        self._next = claim.offset
        self._end = claim.offset + claim.length
        self._pool = ThreadPoolExecutor(ahead, thread_name_prefix="flowledger-content-read")
        self._free = [bytearray(self._part) for _ in range(ahead + 1)]
        self._futures: deque[tuple[int, int, bytearray, Future[tuple[int, int]]]] = deque()
        self._join = checksum.zeros_operator(self._part)  # joins a full part's CRC in ~32 XORs
        self._current: bytearray | None = None
        self._buf = memoryview(b"")
        self._crc = 0
        self._seen = 0
        self._verified = False

    def start(self) -> ParallelReader:
        """Put the first `ahead` ranged GETs in flight (the constructor makes no request)."""
        self._submit()
        return self

    def _submit(self) -> None:
        while len(self._futures) < self._ahead and self._next < self._end and self._free:
            n = min(self._part, self._end - self._next)
            buf = self._free.pop()
            fut = self._pool.submit(self._get, self._next, n, buf)
            self._futures.append((self._next, n, buf, fut))
            self._next += n

    def _get(self, start: int, n: int, buf: bytearray) -> tuple[int, int]:
        """Fill `buf` with the range; (bytes read, their CRC-32)."""
        pos = 0
        with memoryview(buf) as view, self._store.open_read(self._key, start, n) as stream:
            while pos < n:
                chunk = stream.read(min(self.CHUNK, n - pos))
                if not chunk:
                    break
                view[pos : pos + len(chunk)] = chunk
                pos += len(chunk)
            return pos, checksum.update(0, view[:pos])

    def readable(self) -> bool:
        return True

    def _fetch(self) -> bool:
        if self._current is not None:  # the consumer copied it out: reuse the buffer
            self._free.append(self._current)
            self._current = None
        self._submit()
        if not self._futures:
            if not self._verified:
                _check(self._claim, self._url, self._seen, self._crc)
                self._verified = True
            return False
        start, n, buf, fut = self._futures.popleft()
        try:
            got, crc = fut.result()
        except (NotFound, RangeNotSatisfiable) as exc:
            if start == self._claim.offset:
                raise _missing(self._claim, self._url, exc) from exc
            got, crc = 0, 0  # the object ends before this part: truncated
        except StorageError as exc:
            raise translate(exc, f"read content {self._claim}") from exc
        data = memoryview(buf)[:got]
        if got == self._part:
            self._crc = checksum.combine_with(self._join, self._crc, crc)
        else:
            self._crc = checksum.combine(self._crc, crc, got)
        self._seen += got
        if got < n:
            _check(self._claim, self._url, self._seen, self._crc)
        self._current, self._buf = buf, data
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        while not self._buf:
            if not self._fetch():
                return 0
        n = min(len(buffer), len(self._buf))
        buffer[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        return n

    def close(self) -> None:
        for _, _, _, fut in self._futures:
            fut.cancel()
        self._futures.clear()
        self._pool.shutdown(wait=True)  # no worker may still write into a buffer
        self._buf = memoryview(b"")
        super().close()


def open_stream(
    store: ObjectStore, claim: ContentClaim, in_memory_max: int, part: int, ahead: int
) -> BinaryIO:
    """A stream of the content; small contents are fully verified before the first byte."""
    if claim.length <= in_memory_max:
        return io.BytesIO(read_bytes(store, claim))
    url = store.url(claim.resource_claim.key)
    reader = ParallelReader(store, claim, url, part, ahead).start()
    return cast(BinaryIO, io.BufferedReader(reader, 1024 * 1024))
