"""Request bodies (pydantic), in NiFi's REST shapes where NiFi has an equivalent."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

_STRICT = ConfigDict(extra="forbid")


class SearchValue(BaseModel):
    model_config = _STRICT
    value: str = Field(min_length=1, max_length=4096)
    inverse: bool = False


class ProvenanceRequest(BaseModel):
    """NiFi's `ProvenanceRequestDTO`: search terms keyed by searchable field (NiFi's names such
    as `FlowFileUUID`, `EventType`, `ProcessorID`, `Filename`, `TransitURI`, or ours in
    snake_case) or by an attribute name; `*` and `?` are wildcards."""

    model_config = _STRICT
    searchTerms: dict[str, SearchValue] = Field(default_factory=dict, max_length=32)
    startDate: datetime | None = None
    endDate: datetime | None = None
    minimumFileSize: int | None = Field(default=None, ge=0)
    maximumFileSize: int | None = Field(default=None, ge=0)
    maxResults: int = Field(default=1000, ge=1, le=10_000)

    @field_validator("startDate", "endDate")
    @classmethod
    def _utc(cls, v: datetime | None) -> datetime | None:
        if v is not None and v.tzinfo is None:
            return v.replace(tzinfo=UTC)  # times are UTC end to end
        return v

    @model_validator(mode="after")
    def _ranges(self) -> ProvenanceRequest:
        if self.startDate and self.endDate and self.startDate > self.endDate:
            raise ValueError("startDate is after endDate")
        if (
            self.minimumFileSize is not None
            and self.maximumFileSize is not None
            and self.minimumFileSize > self.maximumFileSize
        ):
            raise ValueError("minimumFileSize is larger than maximumFileSize")
        return self


class ProvenanceSubmission(BaseModel):
    model_config = _STRICT
    request: ProvenanceRequest = Field(default_factory=ProvenanceRequest)


class ProvenanceBody(BaseModel):
    """`POST /nifi-api/provenance`: `{"provenance": {"request": {...}}}`."""

    model_config = _STRICT
    provenance: ProvenanceSubmission


class LineageRequest(BaseModel):
    """NiFi's `LineageRequestDTO`: FLOWFILE (by `uuid`, or by `eventId`'s FlowFile),
    PARENTS or CHILDREN (expand the event `eventId`)."""

    model_config = _STRICT
    lineageRequestType: Literal["FLOWFILE", "PARENTS", "CHILDREN"] = "FLOWFILE"
    uuid: str | None = Field(default=None, min_length=1, max_length=256)
    eventId: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _target(self) -> LineageRequest:
        if self.lineageRequestType == "FLOWFILE" and not self.uuid and self.eventId is None:
            raise ValueError("a FLOWFILE lineage request needs uuid or eventId")
        if self.lineageRequestType != "FLOWFILE" and self.eventId is None:
            raise ValueError(f"a {self.lineageRequestType} lineage request needs eventId")
        return self


class LineageSubmission(BaseModel):
    model_config = _STRICT
    request: LineageRequest


class LineageBody(BaseModel):
    """`POST /nifi-api/provenance/lineage`: `{"lineage": {"request": {...}}}`."""

    model_config = _STRICT
    lineage: LineageSubmission


class ReplayBody(BaseModel):
    """`POST /nifi-api/provenance-events/replays` (NiFi's `SubmitReplayRequestEntity`)."""

    model_config = _STRICT
    eventId: int = Field(ge=0)


class SqlBody(BaseModel):
    """`POST /sql`: one SELECT over the view `provenance`."""

    model_config = _STRICT
    sql: str = Field(min_length=1, max_length=100_000)
    maxRows: int | None = Field(default=None, ge=1)
