"""Resource claims (one immutable object) and content claims (a checked slice of one)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .errors import InvalidClaim


@dataclass(frozen=True, order=True)
class ResourceClaim:
    """One object in a container: `<section>/<identifier>` under the container's prefix.

    Identifiers are `<epoch ms>-<process nonce>-<counter>`: unique across processes and
    restarts, so a resource claim is never reused once its writer is gone.
    """

    container: str
    section: str
    identifier: str

    @property
    def key(self) -> str:
        """The object key inside the container's store."""
        return f"{self.section}/{self.identifier}"

    @property
    def ref(self) -> str:
        """The repository-wide name used in the claim ledger."""
        return f"{self.container}/{self.section}/{self.identifier}"

    @classmethod
    def from_ref(cls, ref: str) -> ResourceClaim:
        container, section, identifier = ref.rsplit("/", 2)
        return cls(container, section, identifier)

    def __str__(self) -> str:
        return self.ref


@dataclass(frozen=True)
class ContentClaim:
    """A content: `length` bytes at `offset` of a resource claim, with their checksum.

    A claim returned by `create()` is a reservation (length -1, no checksum); the claim a
    writer hands back on close is the one to keep, store and pass to `read`.
    """

    resource_claim: ResourceClaim
    offset: int
    length: int = -1
    checksum: str = ""

    def __post_init__(self) -> None:
        # Checked here so no read reaches a backend with them (a negative seek is EINVAL).
        if self.offset < 0:
            raise InvalidClaim(f"content claim {self}: offset {self.offset} is negative")
        if self.length < -1:
            raise InvalidClaim(f"content claim {self}: length {self.length} is negative")

    @property
    def written(self) -> bool:
        return self.length >= 0 and bool(self.checksum)

    def to_dict(self) -> dict[str, Any]:
        rc = self.resource_claim
        return {
            "container": rc.container,
            "section": rc.section,
            "identifier": rc.identifier,
            "offset": self.offset,
            "length": self.length,
            "checksum": self.checksum,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"))

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ContentClaim:
        try:
            rc = ResourceClaim(str(d["container"]), str(d["section"]), str(d["identifier"]))
            return cls(rc, int(d["offset"]), int(d.get("length", -1)), str(d.get("checksum", "")))
        except InvalidClaim:
            raise
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a content claim: {d!r} ({exc})") from exc

    @classmethod
    def from_json(cls, text: str | bytes | dict[str, Any]) -> ContentClaim:
        if isinstance(text, dict):
            return cls.from_dict(text)
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not a content claim (invalid JSON): {exc}") from exc
        if not isinstance(data, dict):
            raise ValueError(f"not a content claim: {data!r}")
        return cls.from_dict(data)

    def __str__(self) -> str:
        return f"{self.resource_claim.ref}@{self.offset}+{self.length}"
