"""Key validation: one rule set, so every backend accepts exactly the same keys."""

from __future__ import annotations

import re

from .errors import InvalidKey

MAX_KEY_BYTES = 1024  # S3's limit on the full key, including the repository prefix
RESERVED_PREFIX = ".flowledger-"  # local backend keeps temp files and locks under this
#: Control characters (C0 and DEL): one regular-expression scan instead of a Python step per
#: character (every request validates its key).
_CONTROL = re.compile("[\x00-\x1f\x7f]")


def validate_key(key: str, root_prefix: str = "") -> str:
    """Return `key` if it is safe; raise InvalidKey naming the problem otherwise."""
    if not isinstance(key, str) or not key:
        raise InvalidKey(f"invalid key {key!r}: keys must be non-empty strings", key)
    bad = _CONTROL.search(key)
    if bad is not None:
        raise InvalidKey(
            f"invalid key {key!r}: control character {bad.group()!r} is not allowed", key
        )
    if key.startswith("/"):
        raise InvalidKey(f"invalid key {key!r}: keys are relative and must not start with '/'", key)
    segments = key.split("/")
    if any(s == "" for s in segments[:-1]) or key.endswith("/"):
        raise InvalidKey(f"invalid key {key!r}: empty path segment ('//' or trailing '/')", key)
    if any(s in (".", "..") for s in segments):
        raise InvalidKey(f"invalid key {key!r}: '.' and '..' segments are not allowed", key)
    if segments[0].startswith(RESERVED_PREFIX):
        raise InvalidKey(f"invalid key {key!r}: prefix {RESERVED_PREFIX!r} is reserved", key)
    size = len((root_prefix + key).encode("utf-8"))
    if size > MAX_KEY_BYTES:
        raise InvalidKey(
            f"invalid key {key[:40]!r}...: {size} bytes with the repository prefix, "
            f"over the S3 limit of {MAX_KEY_BYTES}",
            key,
        )
    return key


def validate_prefix(prefix: str) -> str:
    """A listing prefix may be empty or end with '/', but must otherwise be a valid key."""
    if prefix == "":
        return prefix
    validate_key(prefix.rstrip("/") or "x")
    return prefix
