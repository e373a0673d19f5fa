"""Nothing stray after a crash or an error: `content get` never leaves a partial
file; a `content put` killed mid-upload leaves no temp file and no incomplete multipart upload
once `content cleanup` (or the next start) has run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from storage import StoreSettings, open_store
from storage.content import ContentClaim, ContentRepository, ContentRepositorySettings
from tests.support.servers import S3Endpoint

MiB = 1024 * 1024


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "flowledger", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)


def _wait_for(what: Callable[[], bool], proc: subprocess.Popen[bytes], why: str) -> None:
    deadline = time.monotonic() + 60
    while not what():
        assert proc.poll() is None, f"content put exited early: {proc.returncode}"
        assert time.monotonic() < deadline, f"timed out waiting for {why}"
        time.sleep(0.05)


def _kill_put_mid_upload(
    tmp_path: Path, repo: str, started: Callable[[], bool], size: int, env: dict[str, str]
) -> None:
    """`content put FIFO`: feed `size` bytes, wait until the upload has started, SIGKILL."""
    fifo = tmp_path / "input.fifo"
    os.mkfifo(fifo)
    cmd = [sys.executable, "-m", "flowledger", "content", "put", str(fifo), "--repo", repo]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with open(fifo, "wb") as fh:
            fh.write(os.urandom(size))
            fh.flush()
            _wait_for(started, proc, "the upload to start")
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL


@pytest.mark.unit
@pytest.mark.timeout(120)
def test_killed_local_put_leaves_no_temp_file_after_cleanup(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    tmp_dir = repo / ".flowledger-tmp"

    def temp_file_exists() -> bool:
        return tmp_dir.is_dir() and any(tmp_dir.iterdir())

    # Past large_content_threshold (1 MiB): streamed to a temp file of its own.
    _kill_put_mid_upload(tmp_path, str(repo), temp_file_exists, 3 * MiB, dict(os.environ))
    assert temp_file_exists()  # what the crash left
    res = _cli("content", "cleanup", "--repo", str(repo), "--older-than", "0", "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["aborted_uploads"] >= 1
    assert not temp_file_exists()


@pytest.mark.unit
def test_the_default_age_keeps_fresh_uploads_and_next_start_removes_old_ones(
    tmp_path: Path,
) -> None:
    root = open_store(str(tmp_path / "repo"))
    writer = root.scoped("content").open_writer("x/in-flight")
    writer.write(b"half")  # a live writer's temp file
    settings = ContentRepositorySettings(archive_cleanup_frequency=0)
    with ContentRepository.open(root, settings):  # cleanup on start, 24 h threshold
        pass
    tmp_dir = tmp_path / "repo" / ".flowledger-tmp"
    assert len(list(tmp_dir.iterdir())) == 1  # too young to be a dead writer's
    aged = open_store(str(tmp_path / "repo"), StoreSettings(multipart_purge_age=0))
    with ContentRepository.open(aged, settings):
        pass
    assert list(tmp_dir.iterdir()) == []
    writer.abort()


@pytest.mark.unit
def test_failed_get_leaves_no_file(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    src = tmp_path / "in.bin"
    src.write_bytes(os.urandom(2 * MiB))
    put = _cli("content", "put", str(src), "--repo", str(repo))
    assert put.returncode == 0, put.stderr
    claim = ContentClaim.from_json(put.stdout)
    # Flip a byte of the stored object: the read fails its checksum after writing some bytes.
    obj = next(p for p in (repo / "content" / "containers").rglob("*") if p.is_file())
    data = bytearray(obj.read_bytes())
    data[-1] ^= 0xFF
    obj.write_bytes(bytes(data))
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    (out_dir / "keep.bin").write_bytes(b"previous")
    res = _cli(
        "content", "get", claim.to_json(), "-o", str(out_dir / "keep.bin"), "--repo", str(repo)
    )
    assert res.returncode == 6  # integrity
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr
    assert sorted(p.name for p in out_dir.iterdir()) == ["keep.bin"]
    assert (out_dir / "keep.bin").read_bytes() == b"previous"  # untouched


@pytest.mark.minio
@pytest.mark.timeout(180)
def test_killed_s3_put_leaves_no_multipart_upload_after_cleanup(
    minio: S3Endpoint, tmp_path: Path
) -> None:
    bucket = minio.new_bucket()
    client = minio.client()
    repo = f"s3://{bucket}/repo"
    env = {
        **os.environ,
        "AWS_ENDPOINT_URL": minio.endpoint,
        "AWS_ACCESS_KEY_ID": minio.access_key,
        "AWS_SECRET_ACCESS_KEY": minio.secret_key,
        "AWS_REGION": minio.region,
    }

    def uploads() -> list[str]:
        found = client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
        return [u["UploadId"] for u in found if u["Key"].startswith("repo/")]

    # One part (8 MiB, fs.s3a.multipart.size) and more: a multipart upload is under way.
    _kill_put_mid_upload(tmp_path, repo, lambda: bool(uploads()), 9 * MiB, env)
    assert uploads()  # what the crash left
    res = _cli("content", "cleanup", "--repo", repo, "--older-than", "0", "--json", env=env)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["aborted_uploads"] >= 1
    assert uploads() == []
