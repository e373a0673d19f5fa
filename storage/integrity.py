"""Checksums on committed objects: one error, and the three ways objects carry a checksum.

- Referenced objects (data files, archive files) have their checksum recorded where they are
  referenced (commit metadata, the archive manifest): `checksum_of` / `verify`.
- Self-describing JSON documents embed theirs: the body is canonical JSON (keys sorted, no
  spaces) and a last field `"crc32":"crc32:XXXXXXXX"` holds the CRC of the body's bytes (the
  document as it would be without that field): `seal_json` / `open_json`. The bytes are
  checked before they are parsed.
- Self-describing binary objects (journals) end with a 16-byte trailer `FLCRC32:` + 8 hex
  digits over everything before it: `seal_blob` / `open_blob`.

Every check runs before the bytes reach a decoder (pyarrow, fastavro, json), so damage is an
`IntegrityError` naming the object, never wrong rows or a crash in native code. Objects written
before checksums existed carry none and are read unverified (see docs/architecture.md).
"""

from __future__ import annotations

import json
import re
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


_KEY = b'"crc32":"crc32:'
#: A last field that holds a checksum under another name: the name itself was damaged.
_DAMAGED_FIELD = re.compile(rb'"[^"]{1,12}":"crc32:[0-9a-f]{8}"\}$')
_SEALED_TAIL = len(_KEY) + 8 + 2  # "crc32":"crc32:XXXXXXXX"}


def seal_json(doc: Mapping[str, Any]) -> bytes:
    """The document as canonical JSON followed by a last `crc32` field over those bytes."""
    body = canonical({k: v for k, v in doc.items() if k != FIELD})
    sep = b"" if body == b"{}" else b","
    return body[:-1] + sep + _KEY + checksum_of(body)[6:].encode() + b'"}'


def _sealed_crc(data: bytes) -> tuple[int, str] | None:
    """(CRC of the body bytes, recorded checksum) when `data` ends with a sealed field."""
    n = len(data)
    if n < _SEALED_TAIL + 1 or data[n - _SEALED_TAIL : n - 10] != _KEY or data[-2:] != b'"}':
        return None
    cut = n - _SEALED_TAIL  # the byte before the field: "," (or "{" for an empty body)
    view = memoryview(data)
    if data[cut - 1 : cut] == b",":
        crc = zlib.crc32(b"}", zlib.crc32(view[: cut - 1]))
    elif cut == 1 and data[:1] == b"{":
        crc = zlib.crc32(b"{}")
    else:
        return None
    return crc, "crc32:" + data[n - 10 : n - 2].decode("ascii", "replace")


def open_json(data: bytes, where: str) -> dict[str, Any]:
    """Verify, then parse a sealed JSON document (a legacy one without `crc32` is accepted)."""
    sealed = _sealed_crc(data)
    if sealed is None and _DAMAGED_FIELD.search(data[-48:]):
        raise IntegrityError(f"{where} is corrupt: its checksum field is damaged", where)
    if sealed is not None:
        actual = format_checksum(sealed[0])
        if actual != sealed[1]:
            raise IntegrityError(
                f"{where} is corrupt: checksum {actual} != recorded {sealed[1]} "
                f"({len(data)} bytes read); the object was damaged or truncated",
                where,
            )
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
    if sealed is None and expected is not None:  # not in last place: check the fields
        verify(canonical(doc), str(expected), where)
    return doc


def seal_blob(data: bytes | bytearray | memoryview) -> bytes:
    """`data` followed by its checksum trailer (one copy, like `bytes(data)`)."""
    trailer = TRAILER_MAGIC + f"{zlib.crc32(data) & 0xFFFFFFFF:08x}".encode()
    return b"".join((data, trailer))


def open_blob(data: bytes, where: str) -> tuple[bytes | memoryview, bool]:
    """(body, verified): the body without its trailer, checked. Without a trailer (a legacy
    object, or a truncated one) the bytes come back with verified=False: the caller must
    check what it can (e.g. the row count its name promises) before trusting them."""
    if len(data) < TRAILER_LEN or data[-TRAILER_LEN:-8] != TRAILER_MAGIC:
        return data, False
    body, hex_crc = memoryview(data)[:-TRAILER_LEN], data[-8:]  # no copy of the body
    verify(body, "crc32:" + hex_crc.decode("ascii", "replace"), where)
    return body, True
