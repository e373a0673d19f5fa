"""storage.documents: JSON documents replaced by compare-and-swap, on every
backend (the `store` fixture marks each with its tier): create-only, replace-if-match, the
losing writer's Conflict, damage detected."""

from __future__ import annotations

import pytest

from storage import (
    Conflict,
    IntegrityError,
    NotFound,
    ObjectStore,
    open_json,
    read_document,
    write_document,
)


def test_create_replace_and_conflicts(store: ObjectStore) -> None:
    with pytest.raises(NotFound):
        read_document(store, "doc")
    first = write_document(store, "doc", {"n": 1, "nonce": "a"}, None)
    with pytest.raises(Conflict):  # create-only: someone created it first
        write_document(store, "doc", {"n": 1, "nonce": "b"}, None)
    doc = read_document(store, "doc")
    assert (doc.body, doc.etag) == ({"n": 1, "nonce": "a"}, first)
    second = write_document(store, "doc", {"n": 2, "nonce": "c"}, doc.etag)
    with pytest.raises(Conflict):  # replace-if-match against the etag it replaced
        write_document(store, "doc", {"n": 3, "nonce": "d"}, first)
    assert read_document(store, "doc").body == {"n": 2, "nonce": "c"}
    assert read_document(store, "doc").etag == second
    # Stored sealed: the raw bytes verify with open_json and carry the checksum field.
    assert b'"crc32":"crc32:' in store.get("doc")
    assert open_json(store.get("doc"), "doc") == {"n": 2, "nonce": "c"}


def test_damaged_document_is_an_integrity_error(store: ObjectStore) -> None:
    write_document(store, "doc", {"n": 12345}, None)
    store.put("doc", store.get("doc").replace(b"12345", b"12346"))
    with pytest.raises(IntegrityError, match="doc is corrupt"):
        read_document(store, "doc")
