"""Fixtures of the keyed-table tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from storage import LocalObjectStore, StoreSettings, open_store
from timeline.keyed.write import base_stream


@pytest.fixture
def ranged_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every file is read in ranges, in pieces of 20 kB: small test files take the path a
    table's big files take."""
    monkeypatch.setattr(base_stream, "STREAM_MIN", 1)
    monkeypatch.setattr(base_stream, "STREAM_PIECE", 20_000)


@pytest.fixture
def local_store(tmp_path: Path) -> LocalObjectStore:
    """A local store without fsync under the test's folder."""
    store = open_store("file://" + str(tmp_path / "s"), StoreSettings(fsync=False))
    assert isinstance(store, LocalObjectStore)
    return store
