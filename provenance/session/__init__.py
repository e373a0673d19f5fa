"""FlowFiles and process sessions in NiFi's sense, on the content and provenance
repositories (see docs/provenance.md, "Sessions").

with FlowRepository.open("s3://lake/flowledger") as repo, repo.session("GetFile") as s:
    ff = s.import_from("flights.csv", s.create())
    s.receive(ff, "file:///data/flights.csv")
    s.transfer(ff, "success")                  # commit: content, counts, then events
"""

from .errors import (
    FlowFileHandlingError,
    SessionCommitError,
    SessionError,
    SessionUnknownOutcome,
)
from .events import CREATION, build_events
from .flowfile import FlowFile, new_flowfile, new_uuid
from .repository import FlowRepository
from .session import CommitResult, ProcessSession

__all__ = [
    "CREATION",
    "CommitResult",
    "FlowFile",
    "FlowFileHandlingError",
    "FlowRepository",
    "ProcessSession",
    "SessionCommitError",
    "SessionError",
    "SessionUnknownOutcome",
    "build_events",
    "new_flowfile",
    "new_uuid",
]
