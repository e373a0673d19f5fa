"""Provenance events for tests: NiFi's test event, numbered."""

from __future__ import annotations

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
