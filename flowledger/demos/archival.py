"""Demo of archival: a bounded active timeline, Avro archive files, merge, combined view."""

from __future__ import annotations

import time
import uuid

import pyarrow as pa
from rich.console import Console
from rich.table import Table as RichTable

from storage import ObjectStore
from timeline import Table
from timeline.archive import (
    ArchivalSettings,
    ArchivedTimeline,
    Archiver,
    combined_timeline,
    load_active,
    read_manifest,
    table_state,
)


def demo_archival(store: ObjectStore, console: Console) -> None:
    console.rule("[bold]Timeline archival (Hudi's archiver, Avro archive files)")
    prefix = f"demo-archival/{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:6]}"
    table = Table.open(store.scoped(prefix))
    settings = ArchivalSettings(
        keep_min_commits=4, keep_max_commits=6, archive_merge_files_batch_size=3
    )
    archiver = Archiver(table, settings)
    runs = RichTable("after commit", "archived", "archive file", "active commits")
    for k in range(1, 21):
        table.write(pa.table({"id": [k], "batch": [f"b{k}"]}))
        result = archiver.run(merge=False)
        if result.file:
            kept = len(load_active(table.tl).timeline.completed())
            name = result.file.rsplit("/", 1)[-1]
            runs.add_row(str(k), str(len(result.archived)), name, str(kept))
    console.print(
        f"keep_min_commits={settings.keep_min_commits}, "
        f"keep_max_commits={settings.keep_max_commits}: one archive object per run, "
        "named by its instant-time range"
    )
    console.print(runs)
    merged = archiver.run(merge=True).merged
    m = read_manifest(table.store)
    console.print(
        f"merged small files into [cyan]{merged.rsplit('/', 1)[-1] or '-'}[/]: "
        f"{len(m.files)} archive file(s), {m.instant_count} archived instants"
    )
    combined = combined_timeline(table)
    active = load_active(table.tl).timeline
    reader = ArchivedTimeline(table.store)
    first = reader.records(with_bodies=True)[0]
    console.print(
        f"active timeline: {len(active.completed())} completed instants; combined view "
        f"(archived + active): {len(combined.completed())}; oldest archived commit "
        f"{first.time} wrote {first.entry().added[0].path.rsplit('/', 1)[-1]}"
    )
    rows = table_state(table.tl).snapshot().rows
    console.print(f"rows readable through the archive checkpoint: [bold]{rows}[/] of 20")
    console.print(f"commit-log positions kept: {len(list(table.store.list('_timeline/log/')))}")
