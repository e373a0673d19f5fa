"""What `flowledger pipeline run` prints: rich tables of what the run did."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.tree import Tree

from .run import PipelineResult
from .trace import TraceNode


def _tree(node: TraceNode, tree: Tree) -> None:
    for e in node.events:
        where = f" [cyan]{e.transit_uri}[/]" if e.transit_uri else ""
        tree.add(f"[magenta]{e.event_type}[/] #{e.event_id} {e.component_id}{where}")
    for parent in node.parents:
        _tree(parent, tree.add(f"[bold]{parent.filename or parent.uuid}[/] [dim]{parent.uuid}[/]"))


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
