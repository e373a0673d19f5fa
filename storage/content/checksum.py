"""Content checksums: the storage-level CRC-32 helpers (see `storage.checksum`)."""

from ..checksum import (
    ALGORITHM,
    combine,
    combine_with,
    format_checksum,
    parse_checksum,
    update,
    zeros_operator,
)

__all__ = [
    "ALGORITHM",
    "combine",
    "combine_with",
    "format_checksum",
    "parse_checksum",
    "update",
    "zeros_operator",
]
