"""Checksums on committed objects: one error, and the three ways objects carry a checksum.

- Referenced objects (data files, archive files) have their checksum recorded where they are
  referenced (commit metadata, the archive manifest): `checksum_of` / `verify`.
- Self-describing JSON documents embed theirs: a `crc32` field over the canonical body (the
  document without that field, keys sorted, no spaces): `seal_json` / `open_json`.
- Self-describing binary objects (journals) end with a 16-byte trailer `FLCRC32:` + 8 hex
  digits over everything before it: `seal_blob` / `open_blob`.

Every check runs before the bytes reach a decoder (pyarrow, fastavro, json), so damage is an
`IntegrityError` naming the object, never wrong rows or a crash in native code. Objects written
before checksums existed carry none and are read unverified (see docs/architecture.md).
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping
from typing import Any

from .checksum import format_checksum
from .errors import IntegrityError

FIELD = "crc32"
TRAILER_MAGIC = b"FLCRC32:"
TRAILER_LEN = len(TRAILER_MAGIC) + 8


def checksum_of(data: bytes | bytearray | memoryview) -> str:
    """`crc32:XXXXXXXX` of the bytes."""
    return format_checksum(zlib.crc32(data))


def verify(data: bytes | bytearray | memoryview, expected: str, where: str) -> None:
    """Raise IntegrityError naming `where` unless `data` has checksum `expected`.

    An empty `expected` is an object written before checksums: accepted unverified."""
    if not expected:
        return
    actual = checksum_of(data)
    if actual != expected:
        raise IntegrityError(
            f"{where} is corrupt: checksum {actual} != recorded {expected} "
            f"({len(data)} bytes read); the object was damaged or truncated",
            where,
        )


def canonical(doc: Mapping[str, Any]) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def seal_json(doc: Mapping[str, Any]) -> bytes:
    """The document as canonical JSON with a `crc32` field over its other fields."""
    body = {k: v for k, v in doc.items() if k != FIELD}
    return canonical({**body, FIELD: checksum_of(canonical(body))})


def open_json(data: bytes, where: str) -> dict[str, Any]:
    """Parse and verify a sealed JSON document (a legacy one without `crc32` is accepted)."""
    try:
        doc = json.loads(data)
    except ValueError as exc:  # UnicodeDecodeError is a ValueError too
        raise IntegrityError(
            f"{where} is corrupt: not valid JSON ({exc}); the object was damaged or truncated",
            where,
        ) from exc
    if not isinstance(doc, dict):
        raise IntegrityError(f"{where} is corrupt: not a JSON object", where)
    expected = doc.pop(FIELD, None)
    if expected is not None:
        verify(canonical(doc), str(expected), where)
    return doc


def seal_blob(data: bytes) -> bytes:
    """`data` followed by its checksum trailer."""
    return data + TRAILER_MAGIC + f"{zlib.crc32(data) & 0xFFFFFFFF:08x}".encode()


def open_blob(data: bytes, where: str) -> tuple[bytes, bool]:
    """(body, verified): the body without its trailer, checked. Without a trailer (a legacy
    object, or a truncated one) the bytes come back with verified=False: the caller must
    check what it can (e.g. the row count its name promises) before trusting them."""
    if len(data) < TRAILER_LEN or data[-TRAILER_LEN:-8] != TRAILER_MAGIC:
        return data, False
    body, hex_crc = data[:-TRAILER_LEN], data[-8:]
    verify(body, "crc32:" + hex_crc.decode("ascii", "replace"), where)
    return body, True
