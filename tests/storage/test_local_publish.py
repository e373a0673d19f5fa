"""The local backend's create answers with the etag of the bytes it published, even when a
concurrent writer replaces the object between the link and the answer."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import storage.local as local
from storage import LocalObjectStore

pytestmark = pytest.mark.unit


def test_create_returns_its_own_etag_when_a_later_version_lands_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = LocalObjectStore(tmp_path)
    real_link = os.link

    def link_then_overwritten(src: str, dst: str) -> None:
        real_link(src, dst)
        # Another process's compare-and-swap lands right after our create.
        other = Path(str(dst) + ".other")
        other.write_bytes(b"version 2, longer than the first")
        os.replace(other, dst)

    monkeypatch.setattr(local.os, "link", link_then_overwritten)
    created = store.put_if_absent("ids/next", b"version 1")
    monkeypatch.undo()
    now = store.head("ids/next")
    assert store.get("ids/next") == b"version 2, longer than the first"
    assert created.size == len(b"version 1")
    assert created.etag != now.etag  # a CAS against our etag must not match version 2
