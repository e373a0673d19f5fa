"""NiFi's content repository rebuilt on object storage (see docs/content-repository.md).

repo = ContentRepository.open("s3://bucket/flowledger")  # or ContentRepository(store).initialize()
with repo.transaction() as session:
    claim = session.write_bytes(b"hello")                     # packed into a resource claim
repo.read_bytes(claim)                                        # one ranged GET, verified
"""

from .claims import ContentClaim, ResourceClaim
from .containers import Container
from .errors import (
    ClaimNotWritable,
    ContainerFull,
    ContentAccessDenied,
    ContentConflict,
    ContentIntegrityError,
    ContentNotFound,
    ContentRepositoryError,
    ContentStorageFull,
    ContentStoreMissing,
    ContentUnavailable,
    ContentUnknownOutcome,
    InvalidClaim,
)
from .ledger import ClaimLedger, ClaimRecord, LedgerBatch
from .repository import ContentRepository
from .session import ContentSession
from .settings import ContentRepositorySettings
from .state import ContentState
from .writer import ContentWriter, WriterHost

__all__ = [
    "ClaimLedger",
    "ClaimNotWritable",
    "ClaimRecord",
    "Container",
    "ContainerFull",
    "ContentAccessDenied",
    "ContentClaim",
    "ContentConflict",
    "ContentIntegrityError",
    "ContentNotFound",
    "ContentRepository",
    "ContentRepositoryError",
    "ContentRepositorySettings",
    "ContentSession",
    "ContentState",
    "ContentStorageFull",
    "ContentStoreMissing",
    "ContentUnavailable",
    "ContentUnknownOutcome",
    "ContentWriter",
    "InvalidClaim",
    "LedgerBatch",
    "ResourceClaim",
    "WriterHost",
]
