"""What `flowledger pipeline run` prints: rich tables of what the run did."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.tree import Tree

from .correction import CorrectionResult
from .mor import CompactionResult, Counts
from .run import PipelineResult
from .streamed import StreamedInsert
from .trace import TraceNode


def _tree(node: TraceNode, tree: Tree) -> None:
    for e in node.events:
        where = f" [cyan]{e.transit_uri}[/]" if e.transit_uri else ""
        tree.add(f"[magenta]{e.event_type}[/] #{e.event_id} {e.component_id}{where}")
    for parent in node.parents:
        _tree(parent, tree.add(f"[bold]{parent.filename or parent.uuid}[/] [dim]{parent.uuid}[/]"))


def _streamed(s: StreamedInsert, console: Console) -> None:
    console.print(
        f"planes (copy-on-write) by a streamed insert: {s.rows_in:,} rows read from planes.csv "
        f"as {s.batches} record batches, {s.rows_written:,} written by {s.action} {s.instant} "
        f"({s.operation}; keys already held are dropped); the table holds {s.table_rows:,} rows"
    )
    files = Table("base file", "file group", "rows", "bytes", title="Files of that commit")
    for name, group, rows, size in s.files:
        files.add_row(name, group[:13], f"{rows:,}", f"{size:,}")
    if s.files:
        console.print(files)


def _correction(c: CorrectionResult, console: Console) -> None:
    console.print(
        f"late correction of month {c.month}: upserted {c.upserted:,} corrected flights "
        f"(commit {c.upsert_instant or '-'}), deleted {c.deleted:,} cancelled flights "
        f"(commit {c.delete_instant or '-'}) by flight_id"
    )
    slices = Table(
        "partition",
        "file group",
        "base slice",
        "rows in base",
        "log files",
        "records in logs",
        title="File slices of flights_enriched after the correction (merge-on-read)",
    )
    for s in c.slices:
        changed = s.before != s.after or s.logs > 0
        style = "bold yellow" if changed else None
        base = s.after or "-"
        if s.before != s.after:
            base = f"{s.before or '-'} → {base}"
        slices.add_row(
            s.partition,
            s.file_group[:13],
            base,
            f"{s.rows_after:,}",
            str(s.logs),
            f"{s.log_rows:,}",
            style=style,
        )
    console.print(slices)
    logged = sum(1 for s in c.slices if s.logs)
    rewritten = sum(1 for s in c.slices if s.before != s.after)
    console.print(
        f"  {logged} of {len(c.slices)} file groups got log files (delta commits); "
        f"{rewritten} base files rewritten"
    )
    ops = ", ".join(f"{n:,} {op}" for op, n in sorted(c.ops.items()))
    console.print(
        f"delays_by_carrier recomputed incrementally: the changes of flights_enriched after "
        f"{c.changes_since} touched {c.changed_rows:,} rows ({ops or 'none'}) of "
        f"{len(c.carriers)} carriers ({', '.join(c.carriers)}); those carriers' rows were "
        f"upserted (commit {c.delays_instant or '-'})"
    )


def _row_sql(c: CorrectionResult, console: Console) -> None:
    if c.sql_rows:
        ans = Table(
            *c.sql_columns, title="A corrected row joined to the input files it came from (SQL)"
        )
        for row in c.sql_rows:
            ans.add_row(*(str(v) for v in row))
        console.print(ans)
        console.print('  flowledger table sql <repo>/tables/flights_enriched "')
        for line in c.sql.splitlines():
            console.print(f"    {line}", markup=False, highlight=False)
        console.print('  "', markup=False)


def _counts(label: str, snap: Counts, ro: Counts) -> Table:
    t = Table("read", "rows", "corrected rows (revision 2)", title=label)
    t.add_row("snapshot (base + logs merged)", f"{snap.rows:,}", f"{snap.corrected:,}")
    t.add_row("read-optimized (base files only)", f"{ro.rows:,}", f"{ro.corrected:,}")
    return t


def _compaction(m: CompactionResult, console: Console) -> None:
    console.print(
        _counts(
            "flights_enriched before compaction: the correction is still in "
            f"{m.log_files} log file(s) of {m.groups_with_logs} file group(s)",
            m.snapshot_before,
            m.read_optimized_before,
        )
    )
    if not m.instant:
        console.print("  compaction: no file group has logs to fold")
        return
    console.print(
        f"compaction {m.instant} folded the logs of {m.groups_compacted} file group(s) "
        "into new base files"
    )
    same = m.snapshot_after == m.read_optimized_after
    console.print(
        _counts(
            "flights_enriched after compaction: "
            + ("both reads agree" if same else "the reads still differ"),
            m.snapshot_after,
            m.read_optimized_after,
        )
    )


def _compaction_instants(m: CompactionResult, console: Console) -> None:
    t = Table(
        "instant object",
        "action",
        "state",
        title=f"The compaction {m.instant} on the timeline of flights_enriched",
    )
    for name, action, state in m.states:
        t.add_row(name, action, state)
    console.print(t)
    steps = " → ".join(
        f"{action}.{state}" if state != "completed" else action for _, action, state in m.states
    )
    console.print(f"  {steps}")


def _outside(r: PipelineResult, console: Console) -> None:
    """The tables as plain DuckDB reads them, and the jobs Marquez's API lists."""
    if r.outside:
        t = Table(
            "table",
            "files",
            "flowledger rows",
            "DuckDB over `table files`",
            "DuckDB over the folder",
            title="Outside readers: the files a snapshot reads, against listing the folder",
        )
        for o in r.outside:
            t.add_row(
                o.table,
                f"{o.files:,}",
                f"{o.table_rows:,}",
                f"{o.rows_listed:,}",
                f"{o.rows_in_folder:,}"
                + (" (replaced slices too)" if o.rows_in_folder != o.table_rows else ""),
            )
        console.print(t)
        console.print("  flowledger table files <repo>/tables/flights_enriched --json")
    if r.marquez:
        t = Table("job", "runs", "wrote", title="Marquez's read API: jobs in namespace flowledger")
        for j in r.marquez:
            t.add_row(j.name, str(j.runs), ", ".join(j.outputs))
        console.print(t)
        console.print(
            "  flowledger serve, then GET /api/v1/namespaces/flowledger/jobs (marquez-python)"
        )


def print_result(r: PipelineResult, console: Console) -> None:
    console.rule(f"[bold]NYC flights 2013 pipeline, run {r.run_id}")
    console.print(f"repository [cyan]{r.repo_uri}[/]")

    rows = Table("dataset", "rows", title="Rows per table")
    for name, n in r.input_rows.items():
        rows.add_row(f"raw {name}.csv", f"{n:,}")
    for name, n in r.table_rows.items():
        rows.add_row(f"curated {name}", f"{n:,}")
    console.print(rows)

    for name, instants in r.timelines.items():
        t = Table("instant", "action", "state", title=f"Timeline of {name}")
        for when, action, state in instants:
            t.add_row(when, action, state)
        console.print(t)
        console.print(f"  {r.maintenance.get(name, '')}")
        if name == "flights_enriched" and r.compaction is not None and r.compaction.states:
            _compaction_instants(r.compaction, console)

    if r.event_counts:
        ev = Table("event_type", "events", title="Provenance events by type (SQL)")
        for kind, n in r.event_counts:
            ev.add_row(kind, f"{n:,}")
        console.print(ev)
        console.print("  SELECT event_type, count(*) FROM provenance GROUP BY 1 ORDER BY 2 DESC")
    if r.rollover:
        console.print(f"provenance rollover: {r.rollover}")

    if r.lineage is not None:
        root = Tree(f"[bold]Lineage of {r.curated_file}[/]")
        _tree(r.lineage, root)
        console.print(root)
        sources = sorted({e.transit_uri or "" for e in r.lineage.sources()})
        console.print("  raw inputs reached: " + ", ".join(s.rsplit("/", 1)[-1] for s in sources))

    if r.streamed is not None:
        _streamed(r.streamed, console)
    if r.correction is not None:
        _correction(r.correction, console)
    if r.compaction is not None:
        _compaction(r.compaction, console)
    if r.correction is not None:
        _row_sql(r.correction, console)

    ans = Table(
        "carrier",
        "airline",
        "flights in rain",
        "mean departure delay (min)",
        title="Worst mean departure delay in rain, by carrier (from the curated tables)",
    )
    for a in r.answer:
        ans.add_row(
            str(a["carrier"]),
            str(a.get("name") or ""),
            f"{a['flights_in_rain']:,}",
            f"{a['mean_dep_delay_rain']}",
        )
    console.print(ans)

    _outside(r, console)
    if r.replay is not None:
        console.print(f"replay of a SEND: {r.replay.describe()}")
    elif r.replay_problem:
        console.print(f"replay of a SEND: not possible: {r.replay_problem}")
    stages = Table("stage", "seconds", title="Wall time per stage")
    for name, secs in r.stage_seconds.items():
        stages.add_row(name, f"{secs:.1f}")
    console.print(stages)
