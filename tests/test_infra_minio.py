"""The throwaway MinIO servers of the tests and the demo."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from infra import minio

#: A draw of `secrets.token_urlsafe` that once made a test's MinIO refuse to start: MinIO
#: reads a credential value beginning with "env" as a reference to somewhere else.
UNLUCKY = "env_hkLbcLjjVq5UDH9ePH6K3fI0xsv4"


@pytest.mark.unit
def test_a_generated_root_password_never_starts_with_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(secrets, "token_urlsafe", lambda n: UNLUCKY)
    key = minio.new_secret_key()
    assert not key.startswith("env") and key.endswith(UNLUCKY)


@pytest.mark.minio
def test_a_server_starts_whatever_the_random_password(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(secrets, "token_urlsafe", lambda n: UNLUCKY)
    server = minio.start(tmp_path / "minio")
    try:
        assert server.secret_key.endswith(UNLUCKY)
    finally:
        minio.stop(server)
