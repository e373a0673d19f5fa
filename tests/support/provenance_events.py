"""Provenance events for tests: NiFi's test event, numbered."""

from __future__ import annotations

import json
from pathlib import Path

from provenance import ProvenanceEvent, ProvenanceSettings


def settings(tmp_path: Path, **kw: object) -> ProvenanceSettings:
    """Settings with a cache folder of the test's own."""
    return ProvenanceSettings(cache_dir=str(tmp_path / "cache"), **kw)  # type: ignore[arg-type]


def ev(i: int = 0, **kw: object) -> ProvenanceEvent:
    base: dict[str, object] = {
        "event_type": "RECEIVE",
        "flowfile_uuid": f"00000000-0000-0000-0000-{i:012d}",
        "component_id": "1234",
        "component_type": "dummy processor",
        "file_size": 100 + i,
        "event_time": i,
        "transit_uri": "nifi://unit-test",
        "updated_attributes": {"abc": "xyz", "filename": f"file-{i}.txt", "uuid": f"u{i}"},
    }
    base.update(kw)
    return ProvenanceEvent(**base)  # type: ignore[arg-type]


def fork_flow() -> list[dict[str, object]]:
    """A FlowFile `parent` received, forked into `child-1` and `child-2`, and `child-1` sent:
    NiFi events as `provenance ingest` reads them, one JSON object each."""
    return [
        {
            "event_type": "RECEIVE",
            "flowfile_uuid": "parent",
            "component_id": "get",
            "component_type": "GetFile",
            "file_size": 10,
            "transit_uri": "file:/in",
            "event_time": 1000,
        },
        {
            "event_type": "FORK",
            "flowfile_uuid": "parent",
            "component_id": "split",
            "component_type": "SplitText",
            "file_size": 10,
            "event_time": 2000,
            "parent_uuids": ["parent"],
            "child_uuids": ["child-1", "child-2"],
        },
        {
            "event_type": "SEND",
            "flowfile_uuid": "child-1",
            "component_id": "put",
            "component_type": "PutS3Object",
            "file_size": 5,
            "transit_uri": "s3://b/k",
            "event_time": 3000,
            "updated_attributes": {"filename": "part-1"},
        },
    ]


def write_jsonl(path: Path, records: list[dict[str, object]]) -> Path:
    """`records` as JSON lines at `path` (a file `provenance ingest` takes)."""
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path
