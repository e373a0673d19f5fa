"""The event model, NiFi's validation, lineage and rendering (no store needed)."""

from __future__ import annotations

import dataclasses
import io
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from provenance import (
    EVENT_TYPES,
    InvalidEvent,
    LineageError,
    ProvenanceEvent,
    to_dot,
    to_svg,
    validate,
)
from provenance.ingest import read_events
from provenance.lineage import compute_lineage
from provenance.query import Query, SearchTerm, like_pattern, query_mask
from provenance.schema import SQL_TYPES, check_events, conform, events_to_table, rows_to_events

pytestmark = pytest.mark.unit


def ev(**kw: object) -> ProvenanceEvent:
    base: dict[str, object] = {
        "event_type": "CREATE",
        "flowfile_uuid": "ff-1",
        "component_id": "c",
        "component_type": "t",
        "file_size": 1,
        "event_time": 1,
    }
    base.update(kw)
    return ProvenanceEvent(**base)  # type: ignore[arg-type]


def test_all_18_event_types() -> None:
    assert len(EVENT_TYPES) == 18
    assert {
        "CREATE",
        "RECEIVE",
        "FETCH",
        "SEND",
        "UPLOAD",
        "REMOTE_INVOCATION",
        "DOWNLOAD",
        "DROP",
        "EXPIRE",
        "FORK",
        "JOIN",
        "CLONE",
        "CONTENT_MODIFIED",
        "ATTRIBUTES_MODIFIED",
        "ROUTE",
        "ADDINFO",
        "REPLAY",
        "UNKNOWN",
    } == EVENT_TYPES


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"event_type": ""}, "event_type"),
        ({"event_type": "BOGUS"}, "event_type"),
        ({"component_id": ""}, "component_id"),
        ({"component_type": ""}, "component_type"),
        ({"flowfile_uuid": ""}, "flowfile_uuid"),
        ({"file_size": None}, "file_size"),
        ({"event_type": "RECEIVE"}, "transit_uri"),
        ({"event_type": "FETCH"}, "transit_uri"),
        ({"event_type": "SEND"}, "transit_uri"),
        ({"event_type": "UPLOAD"}, "transit_uri"),
        ({"event_type": "FORK"}, "parent_uuids/child_uuids"),
        ({"event_type": "JOIN"}, "parent_uuids/child_uuids"),
        ({"event_type": "CLONE"}, "parent_uuids/child_uuids"),
        ({"event_type": "ROUTE"}, "relationship"),
        ({"event_type": "ADDINFO"}, "alternate_identifier_uri"),
        ({"event_type": "REPLAY", "parent_uuids": ["a"]}, "parent_uuids/child_uuids"),
    ],
)
def test_validation_names_the_missing_field(kw: dict[str, object], field: str) -> None:
    bad = ev(**kw)
    with pytest.raises(InvalidEvent, match=field.replace("/", ".")):
        validate([ev(), bad])
    # The columnar path refuses the same events with the same message.
    table = events_to_table([ev(), bad], 100).drop_columns(["event_id"])
    with pytest.raises(InvalidEvent, match=field.split("/")[0]):
        conform(table, 100)


def test_batch_checks_name_the_first_bad_event_of_the_first_broken_rule() -> None:
    """A valid batch is checked with a few aggregates; a broken one still gets the first
    failing rule's message at its first bad event, as the row-by-row rules give it."""
    good = [ev(flowfile_uuid=f"ff-{i}") for i in range(5)]
    for bad, why in (
        (ev(flowfile_uuid="ff-x", content_claim_offset=-1), "content_claim_offset"),
        (ev(flowfile_uuid="ff-x", file_size=-3), "file_size must be non-negative"),
        (ev(flowfile_uuid="ff-x", event_type="ROUTE"), "Relationship"),
    ):
        table = events_to_table(
            [*good[:3], bad, ev(event_type="ROUTE", relationship="m"), *good[3:]], 100
        )
        with pytest.raises(InvalidEvent, match=rf"event #3 of the batch \(FlowFile ff-x\).*{why}"):
            check_events(table)
    check_events(events_to_table(good, 100))
    check_events(events_to_table([], 100))


def test_valid_events_of_every_type() -> None:
    extra = {
        "RECEIVE": {"transit_uri": "x"},
        "FETCH": {"transit_uri": "x"},
        "SEND": {"transit_uri": "x"},
        "UPLOAD": {"transit_uri": "x"},
        "FORK": {"child_uuids": ["c"]},
        "JOIN": {"parent_uuids": ["p"]},
        "CLONE": {"child_uuids": ["c"]},
        "ROUTE": {"relationship": "success"},
        "ADDINFO": {"alternate_identifier_uri": "urn:x"},
        "REPLAY": {"parent_uuids": ["p"], "child_uuids": ["c"]},
    }
    events = [ev(event_type=t, **extra.get(t, {})) for t in sorted(EVENT_TYPES)]
    assert validate(events) == events
    assert conform(events_to_table(events, 100), 100).num_rows == 18


def test_equality_ignores_parent_child_order() -> None:
    a = ev(event_type="FORK", parent_uuids=["1", "2", "3"], child_uuids=["x", "y"])
    b = ev(event_type="FORK", parent_uuids=["3", "1", "2"], child_uuids=["y", "x"])
    assert a == b and hash(a) == hash(b)
    assert a != ev(event_type="FORK", parent_uuids=["1", "2"], child_uuids=["x", "y"])


def test_construction_keeps_the_dataclass_contract() -> None:
    """Events are built with the least work per event, but as a frozen dataclass would be:
    positional or keyword fields, defaults, private copies of the caller's maps, UUID lists
    as tuples, a clear error for an unknown field or a field given twice."""
    attrs = {"uuid": "ff-1"}
    a = ProvenanceEvent("SEND", "ff-1", "c", "t", 7, 5, -1, None, -1, None, "s3://x",
                        parent_uuids=["p"], updated_attributes=attrs)  # fmt: skip
    attrs["uuid"] = "changed"
    assert a.transit_uri == "s3://x" and a.event_time == 5 and a.parent_uuids == ("p",)
    assert a.updated_attributes == {"uuid": "ff-1"} and a.previous_attributes == {}
    assert a == ProvenanceEvent(
        event_type="SEND", flowfile_uuid="ff-1", component_id="c", component_type="t",
        file_size=7, event_time=5, transit_uri="s3://x", parent_uuids=("p",),
        updated_attributes={"uuid": "ff-1"},
    )  # fmt: skip
    assert a.with_id(9).event_id == 9 and a.with_id(9).transit_uri == "s3://x"
    assert a.to_dict()["source_fields"] == {} and isinstance(ev().event_time, int)
    with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
        ProvenanceEvent("SEND", "ff-1", "c", "t", 7, colour="red")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="multiple values for argument 'event_time'"):
        ProvenanceEvent("SEND", "ff-1", "c", "t", 7, 5, event_time=6)  # type: ignore[misc]
    with pytest.raises(InvalidEvent, match="got a string"):
        ev(parent_uuids="abc")
    with pytest.raises(TypeError):
        ev().previous_attributes["x"] = "y"  # type: ignore[index]


def test_an_event_is_one_object_without_a_dict() -> None:
    """Events are built by the thousand per second: one object each (no per-event dict for
    the garbage collector to track), still a frozen, unordered dataclass."""
    a = ev(event_type="FORK", parent_uuids=["1", "2"], updated_attributes={"k": "v"})
    assert not hasattr(a, "__dict__")
    b = dataclasses.replace(a, parent_uuids=("2", "1"))
    assert a == b and (a != b) is False and a != dataclasses.replace(a, file_size=9)
    assert a.to_dict()["updated_attributes"] == {"k": "v"}
    assert [f.name for f in dataclasses.fields(a)][:5] == [
        "event_type", "flowfile_uuid", "component_id", "component_type", "file_size",
    ]  # fmt: skip
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.file_size = 2  # type: ignore[misc]
    with pytest.raises(TypeError):
        assert a < b


def test_arrow_round_trip_and_truncation() -> None:
    e = ev(
        updated_attributes={"long": "z" * 80, "uuid": "ff-1"},
        previous_file_size=3,
        parent_uuids=["p"],
        event_time=1234,
        lineage_start_date=1000,
        event_id=5,
    )
    back = rows_to_events(events_to_table([e], 50))[0]
    assert back.updated_attributes == {"long": "z" * 50, "uuid": "ff-1"}
    assert back.event_time == 1234 and back.lineage_start_date == 1000
    assert rows_to_events(events_to_table([e], 100))[0] == e


def test_query_mask_terms_wildcards_ranges() -> None:
    events = [
        ev(
            flowfile_uuid=f"ff-{i}",
            component_id=f"comp_{i % 2}",
            event_time=i,
            file_size=i,
            updated_attributes={"filename": f"a{i}.csv"},
        )
        for i in range(10)
    ]
    t = events_to_table(events, 100)

    def hits(q: Query) -> list[int]:
        return [i for i, m in enumerate(query_mask(t, q).to_pylist()) if m]

    assert hits(Query((SearchTerm("component_id", "comp_1"),))) == [1, 3, 5, 7, 9]
    assert hits(Query((SearchTerm("component_id", "comp?1"),))) == [1, 3, 5, 7, 9]
    assert hits(Query((SearchTerm("filename", "a1*"),))) == [1]
    assert hits(Query((SearchTerm("filename", "*.csv", inverted=True),))) == []
    assert hits(Query(start_time=3, end_time=5)) == [3, 4, 5]
    assert hits(Query(min_file_size=8)) == [8, 9]
    assert like_pattern("50%_*?") == "50\\%\\_%_"
    with pytest.raises(ValueError, match="not searchable"):
        SearchTerm("nope", "x")


def test_fork_lineage_nifi_algorithm() -> None:
    fork = ev(
        event_type="FORK",
        flowfile_uuid="p1",
        parent_uuids=["p1", "p2", "p3"],
        child_uuids=["child"],
        event_id=0,
    )
    lineage = compute_lineage([fork], ["child"], 100)
    assert (len(lineage.nodes), len(lineage.edges)) == (2, 1)


def test_two_creators_is_an_error() -> None:
    a = ev(event_type="CREATE", event_id=0, event_time=1)
    b = ev(event_type="CREATE", event_id=1, event_time=2)
    with pytest.raises(LineageError, match="same FlowFile"):
        compute_lineage([a, b], ["ff-1"], 100)
    with pytest.raises(LineageError, match="more than max_lineage_events"):
        compute_lineage([a, b], ["ff-1"], 1)


def test_linear_lineage_renders_as_dot_and_svg() -> None:
    events = [
        ev(event_type="RECEIVE", transit_uri="x", event_id=0, event_time=1),
        ev(event_type="ATTRIBUTES_MODIFIED", event_id=1, event_time=2),
        ev(event_type="SEND", transit_uri="y", event_id=2, event_time=3),
    ]
    lineage = compute_lineage(events, ["ff-1"], 100)
    # RECEIVE -> FlowFile node -> ATTRIBUTES_MODIFIED -> SEND
    assert [(e.source, e.target) for e in lineage.edges] == [
        ("event:0", "flowfile:ff-1"),
        ("flowfile:ff-1", "event:1"),
        ("event:1", "event:2"),
    ]
    dot = to_dot(lineage)
    assert dot.startswith("digraph lineage {") and '"event:1" -> "event:2"' in dot
    svg = ET.fromstring(to_svg(lineage))
    ns = "{http://www.w3.org/2000/svg}"
    assert len(svg.findall(f"{ns}g")) == 4 and len(svg.findall(f"{ns}line")) == 3
    assert json.loads(json.dumps(lineage.to_json()))["edges"][0]["source"] == "event:0"


def test_ingest_reads_our_lines_and_nifi_export() -> None:
    ours = io.StringIO(
        json.dumps(
            {
                "event_type": "SEND",
                "flowfile_uuid": "u",
                "component_id": "c",
                "component_type": "t",
                "file_size": 3,
                "transit_uri": "s3://x",
                "event_time": "2026-01-02T03:04:05Z",
            }
        )
        + "\n\n"
    )
    [e] = list(read_events(ours))
    assert e.event_time == 1767323045000 and e.transit_uri == "s3://x"
    nifi = io.StringIO(
        json.dumps(
            [
                {
                    "eventId": "5d0b2b5e-7c1a-4e0e-9b8c-2f7d3b6c1a11",
                    "eventOrdinal": 42,
                    "eventType": "FORK",
                    "timestampMillis": 1700000000000,
                    "timestamp": "2023-11-14T22:13:20.000Z",
                    "durationMillis": 3,
                    "lineageStart": 1699999999000,
                    "componentId": "proc-1",
                    "componentType": "SplitText",
                    "componentName": "Split",
                    "processGroupId": "pg",
                    "processGroupName": "root",
                    "entityId": "parent",
                    "entityType": "org.apache.nifi.flowfile.FlowFile",
                    "entitySize": 10,
                    "previousEntitySize": 10,
                    "updatedAttributes": {"a": "1"},
                    "previousAttributes": {},
                    "actorHostname": "h",
                    "contentURI": "http://h/nifi-api/x",
                    "previousContentURI": "",
                    "parentIds": ["parent"],
                    "childIds": ["c1", "c2"],
                    "platform": "nifi",
                    "application": "NiFi Flow",
                    "details": None,
                }
            ]
        )
    )
    [n] = list(read_events(nifi))
    assert (n.event_type, n.flowfile_uuid, n.file_size) == ("FORK", "parent", 10)
    assert n.child_uuids == ("c1", "c2") and n.event_duration_ms == 3
    assert n.lineage_start_date == 1699999999000 and n.updated_attributes == {"a": "1"}
    from provenance import IngestError

    with pytest.raises(IngestError, match=r"line 1: .*transit_uri"):
        list(
            read_events(
                io.StringIO(
                    '{"event_type": "SEND", "flowfile_uuid": "u", '
                    '"component_id": "c", "component_type": "t", '
                    '"file_size": 1}\n'
                )
            )
        )


def test_the_documented_view_columns_are_the_views() -> None:
    """docs/provenance.md states the view's columns as a contract: its table lists exactly the
    names, order and SQL types the view has."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "provenance.md").read_text()
    section = doc.split("#### The columns of the `provenance` view", 1)[1].split("\n#", 1)[0]
    documented: list[tuple[str, str]] = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 2 or not cells[0].startswith("`"):
            continue  # prose, the header or its rule
        sql_type = re.match(r"`([^`]+)`", cells[1])
        assert sql_type is not None, line
        documented += [(name, sql_type.group(1)) for name in re.findall(r"`(\w+)`", cells[0])]
    assert documented == list(SQL_TYPES.items())
