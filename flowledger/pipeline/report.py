"""What `flowledger pipeline run` prints: rich tables of what the run did."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.tree import Tree

from .correction import CorrectionResult
from .run import PipelineResult
from .trace import TraceNode


def _tree(node: TraceNode, tree: Tree) -> None:
    for e in node.events:
        where = f" [cyan]{e.transit_uri}[/]" if e.transit_uri else ""
        tree.add(f"[magenta]{e.event_type}[/] #{e.event_id} {e.component_id}{where}")
    for parent in node.parents:
        _tree(parent, tree.add(f"[bold]{parent.filename or parent.uuid}[/] [dim]{parent.uuid}[/]"))


def _correction(c: CorrectionResult, console: Console) -> None:
    console.print(
        f"late correction of month {c.month}: upserted {c.upserted:,} corrected flights "
        f"(commit {c.upsert_instant or '-'}), deleted {c.deleted:,} cancelled flights "
        f"(commit {c.delete_instant or '-'}) by flight_id"
    )
    slices = Table(
        "partition",
        "file group",
        "slice before",
        "rows before",
        "slice after",
        "rows after",
        title="File slices of flights_enriched before and after the correction",
    )
    for s in c.slices:
        changed = s.before != s.after
        style = "bold yellow" if changed else None
        slices.add_row(
            s.partition,
            s.file_group[:13],
            s.before or "-",
            f"{s.rows_before:,}",
            s.after or "-",
            f"{s.rows_after:,}",
            style=style,
        )
    console.print(slices)
    rewritten = sum(1 for s in c.slices if s.before != s.after)
    console.print(f"  {rewritten} of {len(c.slices)} file groups got a new slice")
    ops = ", ".join(f"{n:,} {op}" for op, n in sorted(c.ops.items()))
    console.print(
        f"delays_by_carrier recomputed incrementally: the changes of flights_enriched after "
        f"{c.changes_since} touched {c.changed_rows:,} rows ({ops or 'none'}) of "
        f"{len(c.carriers)} carriers ({', '.join(c.carriers)}); those carriers' rows were "
        f"upserted (commit {c.delays_instant or '-'})"
    )
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

    if r.correction is not None:
        _correction(r.correction, console)

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

    if r.replay is not None:
        console.print(f"replay of a SEND: {r.replay.describe()}")
    elif r.replay_problem:
        console.print(f"replay of a SEND: not possible: {r.replay_problem}")
    stages = Table("stage", "seconds", title="Wall time per stage")
    for name, secs in r.stage_seconds.items():
        stages.add_row(name, f"{secs:.1f}")
    console.print(stages)
