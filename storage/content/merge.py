"""Server-side merge: large contents are concatenated with UploadPartCopy, never downloaded."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from ..errors import StorageError
from ..objectstore import ByteRange
from . import checksum
from .claims import ContentClaim
from .errors import translate

if TYPE_CHECKING:
    from .state import ContentState


def compose_merge(
    state: ContentState,
    parts: list[ContentClaim],
    header: bytes,
    footer: bytes,
    demarcator: bytes,
) -> ContentClaim | None:
    """Compose the merge into a resource claim of its own; None if the parts are not all
    sealed objects of one container (the caller then streams the merge). The new claim's
    object is sealed but not referenced: the caller adopts it into a session."""
    names = {p.resource_claim.container for p in parts}
    if len(names) != 1:
        return None
    with state.local.lock:
        if any(p.resource_claim in state.local.unsealed for p in parts):
            return None
    container = state.containers.by_name[names.pop()]
    store = container.store
    rc, _ = state.new_resource_claim()
    if rc.container != container.name:
        rc = type(rc)(container.name, rc.section, rc.identifier)
    glue_rc, _ = state.new_resource_claim()
    glue_key = f"{rc.section}/{glue_rc.identifier}"  # claim-shaped: a crash leaves an orphan
    glue = header + demarcator + footer
    g_head, g_dem, g_foot = 0, len(header), len(header) + len(demarcator)
    sources: list[ByteRange] = []
    crc, total = 0, 0

    def add(key: str, start: int, length: int, part_crc: int) -> None:
        nonlocal crc, total
        if length:
            sources.append(ByteRange(key, start, length))
            crc = checksum.combine(crc, part_crc, length)
            total += length

    try:
        if glue:
            store.put_if_absent(glue_key, glue)
        add(glue_key, g_head, len(header), checksum.update(0, header))
        for i, p in enumerate(parts):
            if i:
                add(glue_key, g_dem, len(demarcator), checksum.update(0, demarcator))
            add(p.resource_claim.key, p.offset, p.length, checksum.parse_checksum(p.checksum))
        add(glue_key, g_foot, len(footer), checksum.update(0, footer))
        store.compose(rc.key, sources)
    except StorageError as exc:
        raise translate(exc, f"merge {len(parts)} contents into {rc}") from exc
    finally:
        if glue:  # on failure an orphan: archived and destroyed by cleanup
            with contextlib.suppress(StorageError):
                store.delete(glue_key)
    return ContentClaim(rc, 0, total, checksum.format_checksum(crc))
