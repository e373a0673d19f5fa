"""Small JSON documents replaced by compare-and-swap: the archive manifest, the claim ledger's
checkpoint, the provenance id allocator.

A document is sealed JSON (`integrity.seal_json`: canonical, a last `crc32` field), read with
its etag and verified before it is parsed, and written create-only when there is none yet or
replace-if-match against the etag it was read with. The body must be unique to the write (a
writer id, a nonce, a time): a conditional write whose answer was lost is resolved by reading
back and comparing bytes (docs/object-store.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .integrity import open_json, seal_json
from .objectstore import ObjectStore


@dataclass(frozen=True)
class JsonDocument:
    """A document as read: its fields (without `crc32`) and the etag to replace it against."""

    body: dict[str, Any]
    etag: str


def read_document(store: ObjectStore, key: str) -> JsonDocument:
    """The document at `key`. `NotFound` when there is none; `IntegrityError` naming the
    object when its bytes fail their checksum or are not a JSON object."""
    data, info = store.get_object(key)
    return JsonDocument(open_json(data, store.url(key)), info.etag)


def write_document(
    store: ObjectStore,
    key: str,
    body: Mapping[str, Any],
    etag: str | None,
    *,
    durable: bool = True,
) -> str:
    """Seal and write `body` at `key`: create-only when `etag` is None, else only if the stored
    document still has `etag`. Returns the new etag. `durable=False` (replacements only): the
    caller rebuilds the document after a machine crash (see `ObjectStore.put_if_match`).

    `Conflict`: another writer got there first (the document exists, changed or is gone);
    nothing of this write landed. `UnknownOutcome`: it may or may not have landed."""
    data = seal_json(body)
    if etag is None:
        return store.put_if_absent(key, data).etag
    return store.put_if_match(key, data, etag, durable=durable).etag
