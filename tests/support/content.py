"""Settings and helpers shared by the content repository tests."""

from __future__ import annotations

from storage.content import ContentClaim, ContentRepository, ContentRepositorySettings

MiB = 1024 * 1024
QUIET = ContentRepositorySettings(archive_cleanup_frequency=0)


def settings(**kw: object) -> ContentRepositorySettings:
    return ContentRepositorySettings(**{**QUIET.__dict__, **kw})  # type: ignore[arg-type]


def object_key(claim: ContentClaim) -> str:
    rc = claim.resource_claim
    return f"containers/{rc.container}/{rc.key}"


def write(repo: ContentRepository, data: bytes, claim: ContentClaim | None = None) -> ContentClaim:
    with repo.write(claim) as w:
        w.write(data)
    assert w.claim is not None
    return w.claim
