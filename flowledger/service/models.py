"""Request bodies (pydantic), in NiFi's REST shapes where NiFi has an equivalent."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .nifi_format import parse_data_size, parse_date

_STRICT = ConfigDict(extra="forbid")


class SearchValue(BaseModel):
    model_config = _STRICT
    value: str = Field(min_length=1, max_length=4096)
    inverse: bool = False


class ProvenanceRequest(BaseModel):
    """NiFi's `ProvenanceRequestDTO`: search terms keyed by searchable field (NiFi's names such
    as `FlowFileUUID`, `EventType`, `ProcessorID`, `Filename`, `TransitURI`, or ours in
    snake_case) or by an attribute name; `*` and `?` are wildcards. Dates in NiFi's
    `MM/dd/yyyy HH:mm:ss z` or ISO-8601; sizes in bytes or NiFi's "1 MB". `summarize` leaves
    out the details (and the content checks) of each event, as NiFi does; `clusterNodeId`
    is accepted and ignored (one node)."""

    model_config = _STRICT
    searchTerms: dict[str, SearchValue] = Field(default_factory=dict, max_length=32)
    startDate: datetime | None = None
    endDate: datetime | None = None
    minimumFileSize: int | None = Field(default=None, ge=0, le=2**63 - 1)
    maximumFileSize: int | None = Field(default=None, ge=0, le=2**63 - 1)
    maxResults: int = Field(default=1000, ge=1, le=10_000)
    summarize: bool = False
    incrementalResults: bool = True
    clusterNodeId: str | None = Field(default=None, max_length=256)

    @field_validator("searchTerms", mode="before")
    @classmethod
    def _plain_terms(cls, v: Any) -> Any:
        # NiFi 1.x sent a term as a plain string; later versions as {"value", "inverse"}.
        if isinstance(v, dict):
            return {k: {"value": t} if isinstance(t, str) else t for k, t in v.items()}
        return v

    @field_validator("startDate", "endDate", mode="before")
    @classmethod
    def _date(cls, v: Any) -> Any:
        return parse_date(v) if isinstance(v, str) else v

    @field_validator("startDate", "endDate")
    @classmethod
    def _utc(cls, v: datetime | None) -> datetime | None:
        return None if v is None else parse_date(v.isoformat())  # times are UTC end to end

    @field_validator("minimumFileSize", "maximumFileSize", mode="before")
    @classmethod
    def _size(cls, v: Any) -> Any:
        return parse_data_size(v) if isinstance(v, str) else v

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


class _Submission(BaseModel):
    """The other fields of NiFi's `ProvenanceDTO` / `LineageDTO`: a client may send the entity
    back as it got it; only `request` is read."""

    model_config = _STRICT
    id: str | None = None
    uri: str | None = None
    submissionTime: str | None = None
    expiration: str | None = None
    percentCompleted: int | None = None
    finished: bool | None = None
    results: dict[str, Any] | None = None


class ProvenanceSubmission(_Submission):
    request: ProvenanceRequest = Field(default_factory=ProvenanceRequest)


class ProvenanceBody(BaseModel):
    """`POST /nifi-api/provenance`: `{"provenance": {"request": {...}}}`."""

    model_config = _STRICT
    provenance: ProvenanceSubmission


class LineageRequest(BaseModel):
    """NiFi's `LineageRequestDTO`: FLOWFILE (by `uuid`, or by `eventId`'s FlowFile),
    PARENTS or CHILDREN (expand the event `eventId`); `clusterNodeId` is ignored."""

    model_config = _STRICT
    lineageRequestType: Literal["FLOWFILE", "PARENTS", "CHILDREN"] = "FLOWFILE"
    uuid: str | None = Field(default=None, min_length=1, max_length=256)
    eventId: int | None = Field(default=None, ge=0, le=2**63 - 1)
    clusterNodeId: str | None = Field(default=None, max_length=256)

    @model_validator(mode="after")
    def _target(self) -> LineageRequest:
        if self.lineageRequestType == "FLOWFILE" and not self.uuid and self.eventId is None:
            raise ValueError("a FLOWFILE lineage request needs uuid or eventId")
        if self.lineageRequestType != "FLOWFILE" and self.eventId is None:
            raise ValueError(f"a {self.lineageRequestType} lineage request needs eventId")
        return self


class LineageSubmission(_Submission):
    request: LineageRequest


class LineageBody(BaseModel):
    """`POST /nifi-api/provenance/lineage`: `{"lineage": {"request": {...}}}`."""

    model_config = _STRICT
    lineage: LineageSubmission


class ReplayBody(BaseModel):
    """`POST /nifi-api/provenance-events/replays` (NiFi's `SubmitReplayRequestEntity`;
    `clusterNodeId` is ignored)."""

    model_config = _STRICT
    eventId: int = Field(ge=0, le=2**63 - 1)
    clusterNodeId: str | None = Field(default=None, max_length=256)


class ReplayLastEventBody(BaseModel):
    """`POST /nifi-api/provenance-events/latest/replays` (NiFi's
    `ReplayLastEventRequestEntity`): replay the component's latest event."""

    model_config = _STRICT
    componentId: str = Field(min_length=1, max_length=256)
    nodes: Literal["ALL", "PRIMARY"] = "ALL"


class SqlBody(BaseModel):
    """`POST /sql`: one SELECT over the view `provenance`."""

    model_config = _STRICT
    sql: str = Field(min_length=1, max_length=100_000)
    maxRows: int | None = Field(default=None, ge=1)


class TableSqlBody(SqlBody):
    """`POST /tables/{name}/sql`: one SELECT over the table (a view named after it, and `t`)
    and `provenance`; the table as of `asOf`, or its changes since `changesSince` (`cdc`: one
    row per change; `fullScan`: the snapshot fallback when the range's slices are gone)."""

    asOf: str | None = Field(default=None, max_length=64)
    changesSince: str | None = Field(default=None, max_length=64)
    cdc: bool = False
    fullScan: bool = False
