"""Planning a server-side compose within S3's multipart rules.

Every part but the last must be at least 5 MiB and a copied part at most 5 GiB. Large source
ranges become `UploadPartCopy` parts (no bytes through the client); small ones are read and
packed into uploaded parts of at least 5 MiB, so client memory stays under one part.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from .objectstore import ByteRange

MIN_PART = 5 * 1024 * 1024
MAX_COPY_PART = 5 * 1024 * 1024 * 1024


@dataclass(frozen=True)
class ComposeStep:
    """Either one server-side copied part, or pieces to read and upload as one part."""

    copy: ByteRange | None = None
    pieces: tuple[ByteRange, ...] = field(default_factory=tuple)


def plan_compose(sources: Sequence[ByteRange]) -> Iterator[ComposeStep]:
    pieces: list[ByteRange] = []
    buffered = 0
    for src in sources:
        assert src.length is not None
        pos, left = src.start, src.length
        while left > 0:
            if buffered == 0 and left >= MIN_PART:
                n = min(left, MAX_COPY_PART)
                yield ComposeStep(copy=ByteRange(src.key, pos, n))
            else:
                n = min(left, MIN_PART - buffered) if buffered else left
                pieces.append(ByteRange(src.key, pos, n))
                buffered += n
                if buffered >= MIN_PART:
                    yield ComposeStep(pieces=tuple(pieces))
                    pieces, buffered = [], 0
            pos += n
            left -= n
    if pieces:
        yield ComposeStep(pieces=tuple(pieces))
