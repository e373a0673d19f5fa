"""NiFi's FlowFile: an immutable handle on one piece of data and its attributes."""

from __future__ import annotations

import uuid as uuidlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from storage.content import ContentClaim

from ..event import now_ms

#: NiFi's core attributes (`CoreAttributes`) that every FlowFile carries.
UUID = "uuid"
FILENAME = "filename"
PATH = "path"


@dataclass(frozen=True)
class FlowFile:
    """One version of a FlowFile. Session methods return a new version; the old one is stale.

    `content_claim` is None for a FlowFile without content (size 0). Times are epoch ms (UTC):
    `lineage_start_date` is when the oldest ancestor entered the flow, `entry_date` when this
    FlowFile did.
    """

    uuid: str
    attributes: Mapping[str, str] = field(default_factory=dict)
    content_claim: ContentClaim | None = None
    lineage_start_date: int = field(default_factory=now_ms)
    entry_date: int = field(default_factory=now_ms)

    def __post_init__(self) -> None:
        attrs = dict(self.attributes)
        attrs[UUID] = self.uuid  # NiFi: the uuid attribute always names the FlowFile
        object.__setattr__(self, "attributes", MappingProxyType(attrs))

    @property
    def size(self) -> int:
        return 0 if self.content_claim is None else max(0, self.content_claim.length)

    def get_attribute(self, key: str) -> str | None:
        return self.attributes.get(key)

    def evolve(self, **changes: Any) -> FlowFile:
        return replace(self, **changes)

    def __hash__(self) -> int:
        return hash((self.uuid, self.content_claim, tuple(sorted(self.attributes.items()))))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FlowFile):
            return NotImplemented
        return (
            self.uuid == other.uuid
            and self.content_claim == other.content_claim
            and dict(self.attributes) == dict(other.attributes)
            and self.lineage_start_date == other.lineage_start_date
            and self.entry_date == other.entry_date
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "uuid": self.uuid,
            "attributes": dict(self.attributes),
            "content_claim": None if self.content_claim is None else self.content_claim.to_dict(),
            "lineage_start_date": self.lineage_start_date,
            "entry_date": self.entry_date,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> FlowFile:
        claim = d.get("content_claim")
        return cls(
            uuid=str(d["uuid"]),
            attributes={str(k): str(v) for k, v in dict(d.get("attributes") or {}).items()},
            content_claim=None if claim is None else ContentClaim.from_dict(dict(claim)),
            lineage_start_date=int(d["lineage_start_date"]),
            entry_date=int(d["entry_date"]),
        )


def new_uuid() -> str:
    return str(uuidlib.uuid4())


def new_flowfile(
    uuid: str | None = None,
    attributes: Mapping[str, str] | None = None,
    lineage_start_date: int | None = None,
) -> FlowFile:
    """A FlowFile as NiFi's `create()` makes it: uuid, filename (the uuid) and path `./`."""
    ident = uuid or new_uuid()
    attrs = {FILENAME: ident, PATH: "./"}
    attrs.update(attributes or {})
    now = now_ms()
    return FlowFile(ident, attrs, None, lineage_start_date or now, now)
