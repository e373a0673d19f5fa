"""`flowledger demo`: the provenance repository end to end on a fresh sub-prefix."""

from __future__ import annotations

import tempfile
import time
import uuid
from typing import Any

from rich.console import Console
from rich.table import Table

from provenance import (
    ProvenanceEvent,
    ProvenanceRepository,
    ProvenanceSettings,
    Query,
    SearchTerm,
    to_dot,
)
from provenance.replay import replay
from storage import ObjectStore, now_ms
from storage.content import ContentRepository, ContentRepositorySettings


def _flow(content: ContentRepository) -> list[ProvenanceEvent]:
    """A FlowFile received, split in two, one part routed and sent."""
    with content.transaction() as session:
        raw = session.write_bytes(b'{"orders": [1, 2]}')
        part = session.write_bytes(b'{"order": 1}')
    parent, a, b = (str(uuid.uuid4()) for _ in range(3))
    now = now_ms()
    rc = part.resource_claim
    claim: dict[str, Any] = {
        "content_claim_container": rc.container,
        "content_claim_section": rc.section,
        "content_claim_identifier": rc.identifier,
        "content_claim_offset": part.offset,
        "content_claim_checksum": part.checksum,
    }
    common: dict[str, Any] = {"component_type": "Processor", "lineage_start_date": now}
    return [
        ProvenanceEvent(
            "RECEIVE",
            parent,
            "ListenHTTP",
            file_size=raw.length,
            event_time=now,
            transit_uri="http://demo/orders",
            updated_attributes={"filename": "orders.json"},
            **common,
        ),
        ProvenanceEvent(
            "FORK",
            parent,
            "SplitJson",
            file_size=raw.length,
            event_time=now + 1,
            parent_uuids=(parent,),
            child_uuids=(a, b),
            **common,
        ),
        ProvenanceEvent(
            "ROUTE",
            a,
            "RouteOnAttribute",
            file_size=part.length,
            event_time=now + 2,
            relationship="matched",
            **common,
        ),
        ProvenanceEvent(
            "SEND",
            a,
            "PutS3Object",
            file_size=part.length,
            event_time=now + 3,
            transit_uri="s3://orders/1.json",
            updated_attributes={"filename": "1.json"},
            **claim,
            **common,
        ),
    ]


def demo_provenance(store: ObjectStore, console: Console) -> None:
    console.rule("[bold]Provenance: journals, rollover to Parquet, SQL, lineage, replay")
    run = store.scoped(f"demo/provenance-{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:6]}")
    content = ContentRepository.open(
        run, ContentRepositorySettings(archive_cleanup_frequency=0, cleanup_on_start=False)
    )
    with tempfile.TemporaryDirectory(prefix="flowledger-demo-") as cache:
        repo = ProvenanceRepository.open(run, ProvenanceSettings(cache_dir=cache))
        events = _flow(content)
        ids = repo.register_events(events, sync=True)
        console.print(f"registered {len(ids)} events, ids {ids[0]}..{ids[-1]} (one journal object)")
        child = events[2].flowfile_uuid
        found = repo.query(Query((SearchTerm("flowfile_uuid", child),)))
        console.print(f"queryable before rollover: FlowFile {child[:8]} has {len(found)} events")
        r = repo.rollover()
        console.print(
            f"rollover: {r.events} events from {r.journals} journal(s) -> {r.files} Parquet "
            f"file committed on the provenance timeline ({r.bytes_out} bytes with its index)"
        )
        names, rows = repo.sql(
            "SELECT event_type, count(*) AS n FROM provenance GROUP BY 1 ORDER BY 1"
        )
        t = Table(*names, title="SQL: events by type")
        for row in rows:
            t.add_row(*(str(v) for v in row))
        console.print(t)
        lineage = repo.lineage(child)
        console.print(
            f"lineage of {child[:8]}: {len(lineage.nodes)} nodes, {len(lineage.edges)} edges"
        )
        console.print(to_dot(lineage).strip(), markup=False, highlight=False)
        result = replay(repo, ids[-1], content)
        console.print(result.describe())
        repo.close()
    content.close()
    console.print(f"requests so far: {store.stats.snapshot()}")
