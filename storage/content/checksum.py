"""Content checksums: the storage-level CRC-32 helpers (see `storage.checksum`)."""

from ..checksum import ALGORITHM, combine, format_checksum, parse_checksum, update

__all__ = ["ALGORITHM", "combine", "format_checksum", "parse_checksum", "update"]
