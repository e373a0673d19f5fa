"""Plain PUTs of whole objects through obstore (Rust `object_store`), as the reads go
(storage/s3_reads.py): botocore spends 3.5 ms of CPU on a 100 KiB PUT and 7 ms on a 2 MiB one
(event hooks, request building, signing, response parsing), obstore 0.7 and 2.6 ms, and a
keyed write PUTs a data file and a bloom filter per file group (docs/benchmarks.md, "Upserts").

Only unconditional PUTs of one request go here; conditional writes (create-only, if-match),
multipart uploads and copies stay on botocore, whose answers decide conflicts and unknown
outcomes (storage/s3_calls.py). Only a definite answer is taken from this path: the ETag, or
"access denied". Any other failure is handed back, and the store sends the PUT again through
botocore, which retries, bounds and classifies it as for every other request. Sending a plain
PUT twice is safe (the same bytes under the same key); what this path reports is whether its
attempt may have reached the server, so that a later failure of botocore's attempt is told as
an unknown outcome, never as "unreachable", when the object may have been written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import obstore
from obstore.exceptions import PermissionDeniedError, UnauthenticatedError

if TYPE_CHECKING:
    from obstore.store import S3Store

#: object_store's words for a request that failed to connect (nothing was sent), and for a
#: failure that carried the server's answer (its status: the attempt ended there).
_NOT_SENT = re.compile(r"\bkind: Connect\b")
_ANSWERED = re.compile(r"\bStatus \{\s*status: \d{3}\b")


@dataclass(frozen=True)
class HandedBack:
    """obstore gave no definite answer; `sent`: its attempt may have reached the server."""

    sent: bool


class ObjectPuts:
    """Plain PUTs into one bucket through obstore (sharing the reads' connection pool)."""

    def __init__(self, store: S3Store, max_bytes: int) -> None:
        self._store = store
        #: Larger objects go to botocore (one PUT of them is held whole here as well).
        self.max_bytes = max_bytes

    def put(self, s3_key: str, data: bytes | bytearray | memoryview) -> str | HandedBack:
        """The stored object's ETag, or what to tell botocore's attempt (`HandedBack`)."""
        try:
            result = obstore.put(self._store, s3_key, data, use_multipart=False)
        except (PermissionDeniedError, UnauthenticatedError):
            raise
        except (ValueError, TypeError):  # refused before sending (a path it cannot take)
            return HandedBack(sent=False)
        except Exception as exc:  # any other answer or failure: botocore sends it again
            text = str(exc)
            return HandedBack(sent=not (_NOT_SENT.search(text) or _ANSWERED.search(text)))
        etag = result.get("e_tag")
        return etag if etag else HandedBack(sent=False)  # no ETag: botocore's answer has one
