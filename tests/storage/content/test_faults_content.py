"""Content puts under faults, against a real MinIO behind a fault-injecting proxy: an
acknowledged content is readable with its bytes, and the repository stays readable
(docs/faults.md)."""

from __future__ import annotations

import contextlib
import random
from pathlib import Path

import pytest

from storage import FlowledgerBaseError, ObjectStore, open_store
from storage.content import ContentClaim, ContentRepository
from tests.support.fault_proxy import Fault, FaultProxy
from tests.support.faults import cli, once, through
from tests.support.servers import S3Endpoint

pytestmark = [pytest.mark.faults, pytest.mark.timeout(180)]


def test_cli_content_put_whose_ledger_batch_landed_before_a_refusal_reports_the_claim(
    minio: S3Endpoint, proxy: FaultProxy, tmp_path: Path
) -> None:
    uri = f"s3://{minio.new_bucket()}/repo"
    src = tmp_path / "in.bin"
    src.write_bytes(random.Random(1).randbytes(300_000))
    proxy.rule = once(lambda m, p: m == "PUT" and "/ledger/batches/" in p, Fault.drop(refuse=3))
    res = cli(through(minio, proxy), tmp_path, "content", "put", str(src), "--repo", uri)
    assert any(a == "drop" for _, _, a in proxy.seen)
    assert res.returncode == 0, res.stderr
    out = tmp_path / "out.bin"
    got = cli(minio, tmp_path, "content", "get", res.stdout.strip(), "-o", str(out), "--repo", uri)
    assert got.returncode == 0, got.stderr
    assert out.read_bytes() == src.read_bytes()


def test_content_sessions_on_a_flaky_network(minio: S3Endpoint, proxy: FaultProxy) -> None:
    """Small contents (packed into shared claims) and large ones (their own multipart
    claims), one answer in six lost: every acknowledged content reads back its bytes."""
    uri = f"s3://{minio.new_bucket()}/repo"
    settings = through(minio, proxy).settings(read_back_timeout=5)
    with contextlib.ExitStack() as opened:
        store = opened.enter_context(contextlib.closing(open_store(uri, settings)))
        direct_store = opened.enter_context(contextlib.closing(open_store(uri, minio.settings())))
        _flaky_sessions(store, direct_store, proxy)


def _flaky_sessions(store: ObjectStore, direct_store: ObjectStore, proxy: FaultProxy) -> None:
    """Each repository is closed as soon as it is done with, failed or not: its cleanup
    thread would otherwise run on past the test (and past the servers)."""
    store.capabilities()
    rnd = random.Random(5)

    def flaky(method: str, path: str) -> Fault:
        r = rnd.random()
        if method in ("PUT", "POST") and r < 0.17:
            return Fault.drop(refuse=rnd.choice([0, 0, 1]))
        if r < 0.2:
            return Fault.reset()
        return Fault.forward()

    acked: list[tuple[ContentClaim, bytes]] = []
    failures = 0
    proxy.rule = flaky
    for n in range(10):
        body = rnd.randbytes(6_000_000 if n % 4 == 3 else 2_000 + n)
        try:
            repo = ContentRepository.open(store)
            try:
                with repo.transaction() as session, session.write() as w:
                    w.write(body)
                assert w.claim is not None
                acked.append((w.claim, body))
            finally:
                repo.close()
        except FlowledgerBaseError:
            failures += 1
    proxy.rule = lambda m, p: Fault.forward()
    assert any(a == "drop" for _, _, a in proxy.seen)
    with contextlib.closing(ContentRepository.open(direct_store)) as direct:
        for claim, body in acked:
            assert direct.read_bytes(claim) == body
            assert direct.get_claimant_count(claim) >= 1  # its reference is durable
    assert acked, f"every put failed ({failures})"
