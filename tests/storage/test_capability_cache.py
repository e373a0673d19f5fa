"""The conditional-write probe is cached on disk per endpoint and bucket, safe answers only."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from storage import capability, open_store
from tests.support.servers import S3Endpoint

pytestmark = pytest.mark.minio

_CHILD = """
import sys
from storage import open_store
from tests.support.servers import S3Endpoint
ep = S3Endpoint("minio", sys.argv[1], sys.argv[2], sys.argv[3])
store = open_store(sys.argv[4], ep.settings(capability_cache_ttl=float(sys.argv[5])))
store.put_if_absent("k-" + sys.argv[6], b"x")
print(store.stats.snapshot().get("PROBE", 0))
"""


def _probes_in_new_process(minio: S3Endpoint, uri: str, ttl: float, n: int, cache: Path) -> int:
    env = {"PATH": "/usr/bin:/bin", "FLOWLEDGER_CACHE": str(cache), "PYTHONPATH": "."}
    args = [minio.endpoint, minio.access_key, minio.secret_key, uri, str(ttl), str(n)]
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, *args], env=env, capture_output=True, text=True, check=True
    )
    return int(out.stdout.strip())


def test_second_process_skips_the_probe_within_the_ttl(minio: S3Endpoint, tmp_path: Path) -> None:
    uri = f"s3://{minio.new_bucket()}/repo"
    assert _probes_in_new_process(minio, uri, 3600, 1, tmp_path) == 1
    assert _probes_in_new_process(minio, uri, 3600, 2, tmp_path) == 0
    assert list((tmp_path / "capabilities").glob("*.json"))


def test_ttl_zero_probes_in_every_process(minio: S3Endpoint, tmp_path: Path) -> None:
    uri = f"s3://{minio.new_bucket()}/repo"
    assert _probes_in_new_process(minio, uri, 0, 1, tmp_path) == 1
    assert _probes_in_new_process(minio, uri, 0, 2, tmp_path) == 1
    assert not (tmp_path / "capabilities").exists()


def test_corrupt_cache_file_means_probe_again(
    minio: S3Endpoint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLOWLEDGER_CACHE", str(tmp_path))
    bucket = minio.new_bucket()
    uri = f"s3://{bucket}/repo"
    capability.forget()
    store = open_store(uri, minio.settings())
    store.put_if_absent("a", b"1")
    [doc] = (tmp_path / "capabilities").glob("*.json")
    doc.write_text("{not json")
    capability.forget()  # a new process: nothing in memory
    doc.write_text("{not json")  # forget() removed it; a torn file from another writer
    again = open_store(uri, minio.settings())
    again.put_if_absent("b", b"2")
    assert again.stats.snapshot().get("PROBE", 0) == 1
