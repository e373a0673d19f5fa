"""The output stream of one content: packed into a shared buffer, or streamed on its own."""

from __future__ import annotations

from typing import BinaryIO, Protocol

from ..errors import StorageError
from ..lifecycle import Finishing
from ..objectstore import ObjectWriter
from . import checksum
from .claims import ContentClaim, ResourceClaim
from .containers import Container
from .errors import ContentRepositoryError, translate
from .local import WritableClaim


class WriterHost(Protocol):
    """What a `ContentWriter` tells the session that opened it (`ContentSession` implements
    it through a small adapter, so these calls are not part of the session's own API)."""

    def new_own_claim(self) -> tuple[ResourceClaim, Container]:
        """A resource claim for one content that outgrew the shared buffer."""
        ...

    def moved(self, wc: WritableClaim, rc: ResourceClaim) -> None:
        """The content left the shared `wc` for its own claim `rc` (its reference moves)."""
        ...

    def own_closed(self, rc: ResourceClaim, size: int) -> None:
        """The content's own claim `rc` was uploaded (`size` bytes)."""
        ...

    def closed(self, wc: WritableClaim) -> None:
        """The writer into the shared `wc` closed (the buffer may now be sealed)."""
        ...

    def aborted(self, wc: WritableClaim | None, rc: ResourceClaim | None) -> None:
        """The writer was aborted: drop its reference on `wc` (shared) or `rc` (its own)."""
        ...


class ContentWriter(Finishing):
    """Write the bytes of one content; `close()` returns (and `claim` holds) its claim.

    Bytes go to the session's writable resource claim (a buffer sealed as one object). Once
    the content grows past `large_content_threshold` it moves to a resource claim of its own,
    uploaded as a streaming multipart upload, so memory stays bounded.
    """

    def __init__(self, host: WriterHost, wc: WritableClaim, offset: int, threshold: int) -> None:
        """`threshold`: `large_content_threshold`, past which the content gets its own claim."""
        self._host = host
        self._wc: WritableClaim | None = wc
        self._offset = offset
        self._threshold = threshold
        self._crc = 0
        self._length = 0
        self._big: ObjectWriter | None = None
        self._big_rc: ResourceClaim | None = None
        self._done = False
        self.claim: ContentClaim | None = None

    @property
    def bytes_written(self) -> int:
        return self._length

    def write(self, data: bytes | bytearray | memoryview) -> int:
        if self._done:
            raise ContentRepositoryError("write to a content writer that is already closed")
        n = len(data)
        if self._big is None and self._length + n > self._threshold:
            self._spill()
        try:
            if self._big is not None:
                self._big.write(data)
            else:
                assert self._wc is not None
                self._wc.buf += data
        except StorageError as exc:
            raise translate(exc, f"write content to {self._big_rc}") from exc
        self._crc = checksum.update(self._crc, data)
        self._length += n
        return n

    def write_from(self, stream: BinaryIO, chunk: int = 1024 * 1024) -> int:
        total = 0
        while block := stream.read(chunk):
            total += self.write(block)
        return total

    def _spill(self) -> None:
        """Move this content out of the shared buffer into a streamed claim of its own."""
        wc = self._wc
        assert wc is not None
        rc, container = self._host.new_own_claim()
        big: ObjectWriter | None = None
        try:
            big = container.store.open_writer(rc.key)
            # Both views are released even when the write fails (a traceback would otherwise
            # keep the buffer exported, and `abort` could not truncate it).
            with memoryview(wc.buf) as view, view[self._offset :] as tail:
                big.write(tail)
        except BaseException as exc:
            if big is not None:
                big.abort()
            if isinstance(exc, StorageError):
                raise translate(exc, f"start streaming content into {rc}") from exc
            raise
        del wc.buf[self._offset :]
        self._host.moved(wc, rc)
        self._wc, self._big, self._big_rc = None, big, rc

    def close(self) -> ContentClaim:
        if self.claim is not None:
            return self.claim
        if self._done:
            raise ContentRepositoryError("content writer was aborted")
        self._done = True
        sum_text = checksum.format_checksum(self._crc)
        if self._big is not None:
            assert self._big_rc is not None
            try:
                self._big.commit()
            except BaseException as exc:
                self._host.aborted(None, self._big_rc)  # a commit waits for this writer
                if isinstance(exc, StorageError):
                    raise translate(exc, f"upload content {self._big_rc}") from exc
                raise
            self._host.own_closed(self._big_rc, self._length)
            self.claim = ContentClaim(self._big_rc, 0, self._length, sum_text)
        else:
            assert self._wc is not None
            self.claim = ContentClaim(self._wc.rc, self._offset, self._length, sum_text)
            self._host.closed(self._wc)
        return self.claim

    def abort(self) -> None:
        """Discard what was written: nothing will reference it. The session hears of it
        whatever the discarding raises: its commit and rollback wait for open writers."""
        if self._done:
            return
        self._done = True
        try:
            if self._big is not None:
                self._big.abort()
            elif self._wc is not None:
                del self._wc.buf[self._offset :]
        finally:
            if self._big is not None:
                self._host.aborted(None, self._big_rc)
            elif self._wc is not None:
                self._host.aborted(self._wc, None)

    def exit_ok(self) -> None:
        self.close()

    def exit_failed(self) -> None:
        self.abort()
