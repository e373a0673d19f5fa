"""NiFi's provenance repository on object storage: journals, rollover to Parquet on the
timeline, DuckDB SQL, lineage, replay and expiry (see docs/provenance.md)."""

from .catalog import EventFile, Snapshot
from .errors import (
    EventNotFound,
    FlowFileNotFound,
    IngestError,
    InvalidEvent,
    LineageError,
    MissingEvents,
    ProvenanceConflict,
    ProvenanceError,
    ProvenanceUnknownOutcome,
    ReadOnlyQuery,
    ReplayError,
    SQLError,
)
from .event import EVENT_TYPES, EventType, ProvenanceEvent
from .expiry import ExpiryPlan
from .lineage import Lineage, LineageEdge, LineageNode
from .query import SEARCHABLE_FIELDS, Query, SearchTerm
from .records import to_event, validate
from .render import to_dot, to_svg
from .repository import ProvenanceRepository
from .rollover import RolloverResult
from .schema import COLUMNS, SCHEMA, SQL_TYPES
from .settings import ProvenanceSettings

__all__ = [
    "COLUMNS",
    "EVENT_TYPES",
    "SCHEMA",
    "SEARCHABLE_FIELDS",
    "SQL_TYPES",
    "EventFile",
    "EventNotFound",
    "EventType",
    "ExpiryPlan",
    "FlowFileNotFound",
    "IngestError",
    "InvalidEvent",
    "Lineage",
    "LineageEdge",
    "LineageError",
    "LineageNode",
    "MissingEvents",
    "ProvenanceConflict",
    "ProvenanceError",
    "ProvenanceEvent",
    "ProvenanceRepository",
    "ProvenanceSettings",
    "ProvenanceUnknownOutcome",
    "Query",
    "ReadOnlyQuery",
    "ReplayError",
    "RolloverResult",
    "SQLError",
    "SearchTerm",
    "Snapshot",
    "to_dot",
    "to_event",
    "to_svg",
    "validate",
]
