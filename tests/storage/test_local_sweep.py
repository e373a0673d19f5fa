"""The local store's sweep of temp files left by writers that died (storage/local_sweep.py)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from storage import StoreSettings
from storage.local import TMP_DIR, LocalObjectStore

pytestmark = pytest.mark.unit


def _dead_temp(root: Path, name: str) -> Path:
    path = root / TMP_DIR / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x")
    old = time.time() - 3 * 24 * 3600  # older than multipart_purge_age (24 h)
    os.utime(path, (old, old))
    return path


def test_each_store_sweeps_once_before_its_first_write(tmp_path: Path) -> None:
    """The sweep belongs to the store (shared by its scoped views), not to the process: a
    store opened later in the same process sweeps again, and a store's later writes pay
    nothing."""
    settings = StoreSettings(fsync=False)
    first = _dead_temp(tmp_path, "dead-1")
    store = LocalObjectStore(tmp_path, settings)
    store.put("a", b"1")
    assert not first.exists()
    second = _dead_temp(tmp_path, "dead-2")
    store.scoped("t").put("b", b"2")  # the same store's sweep: done already
    assert second.exists()
    LocalObjectStore(tmp_path, settings).put("c", b"3")
    assert not second.exists()
    assert store.get("a") == b"1" and store.get("t/b") == b"2"
