"""NiFi's asynchronous provenance query and lineage submissions, without server-side state.

A submission's id *is* its request: the request, its submission time and the largest event id
visible then, compressed and base64url-encoded. Any replica can answer a poll by running the
request again, bounded to the same event ids, so replicas behind a load balancer agree and keep
no session. Answers are cached per process; DELETE forgets the id in this process (other
replicas answer it until it expires, which NiFi-style clients never see: they delete last).
"""

from __future__ import annotations

import base64
import json
import threading
import time
import zlib
from dataclasses import dataclass
from typing import Any

from cachetools import FIFOCache

from .errors import InvalidRequest, ServiceNotFound

MAX_ID_CHARS = 8192
MAX_REQUEST_BYTES = 64 * 1024
#: 9999-12-31, the last time with an ISO-8601 form (datetime's range).
MAX_SUBMITTED_MS = 253_402_300_799_999


@dataclass(frozen=True)
class Submission:
    kind: str  # "query" or "lineage"
    request: dict[str, Any]
    submitted_ms: int
    max_event_id: int

    @property
    def id(self) -> str:
        raw = json.dumps(
            [self.kind, self.request, self.submitted_ms, self.max_event_id],
            separators=(",", ":"),
            sort_keys=True,
        ).encode()
        return base64.urlsafe_b64encode(zlib.compress(raw, 9)).decode().rstrip("=")

    @classmethod
    def parse(cls, ident: str, kind: str) -> Submission:
        what = "provenance query" if kind == "query" else "lineage request"
        missing = ServiceNotFound(f"no {what} with id {ident[:40]!r} (unknown or expired)")
        if len(ident) > MAX_ID_CHARS:
            raise missing
        try:
            packed = base64.urlsafe_b64decode(ident + "=" * (-len(ident) % 4))
            # Bounded: a crafted id must not inflate into megabytes.
            raw = zlib.decompressobj().decompress(packed, MAX_REQUEST_BYTES)
            k, request, submitted, bound = json.loads(raw)
        except (ValueError, TypeError, zlib.error) as exc:
            raise missing from exc
        if k != kind or not isinstance(request, dict) or not isinstance(submitted, int):
            raise missing
        if not 0 <= submitted <= MAX_SUBMITTED_MS:  # forged: no real submission time
            raise missing
        if not isinstance(bound, int):
            raise missing
        return cls(k, request, submitted, bound)


class Submissions:
    """Expiry, deletion and a small per-process answer cache."""

    def __init__(self, expiration_s: int, cache_size: int = 64) -> None:
        self.expiration_ms = expiration_s * 1000
        self._deleted: dict[str, int] = {}
        #: Answers by submission, the oldest dropped first.
        self._answers: FIFOCache[str, dict[str, Any]] = FIFOCache(cache_size)
        self._lock = threading.Lock()

    def expires_ms(self, sub: Submission) -> int:
        return sub.submitted_ms + self.expiration_ms

    def new(self, kind: str, request: dict[str, Any], max_event_id: int) -> Submission:
        sub = Submission(kind, request, int(time.time() * 1000), max_event_id)
        if len(sub.id) > MAX_ID_CHARS:
            raise InvalidRequest("the request is too large to submit: send fewer search terms")
        return sub

    def check(self, ident: str, kind: str) -> Submission:
        sub = Submission.parse(ident, kind)
        now = int(time.time() * 1000)
        with self._lock:
            self._deleted = {k: v for k, v in self._deleted.items() if v > now}
            gone = ident in self._deleted
        if gone or now > self.expires_ms(sub):
            what = "provenance query" if kind == "query" else "lineage request"
            raise ServiceNotFound(f"{what} {ident[:40]!r} expired or was deleted")
        return sub

    def cached(self, ident: str) -> dict[str, Any] | None:
        with self._lock:
            return self._answers.get(ident)

    def remember(self, ident: str, answer: dict[str, Any]) -> None:
        with self._lock:
            self._answers[ident] = answer

    def delete(self, ident: str, kind: str) -> Submission:
        sub = self.check(ident, kind)
        with self._lock:
            self._deleted[ident] = self.expires_ms(sub)
            self._answers.pop(ident, None)
        return sub
