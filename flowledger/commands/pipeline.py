"""`flowledger pipeline run`: the NYC flights 2013 pipeline (also what `flowledger demo` runs)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from ..context import CliContext, cli_context
from .options import RepoOption

app = typer.Typer(no_args_is_help=True, help="The NYC flights 2013 pipeline on Spark.")

MasterOption = Annotated[
    str | None,
    typer.Option("--spark-master", help="Spark master URL (default local[*] mode)"),
]


def run_and_print(
    cli: CliContext, repo: str | None, spark_master: str | None, sample: int | None = None
) -> None:
    from ..pipeline import PipelineOptions, print_result, run_pipeline

    console = Console()
    options = PipelineOptions(repo, spark_master, sample, auto_archive=cli.auto_archive)
    result = run_pipeline(options, console)
    print_result(result, console)


@app.command()
def run(
    ctx: typer.Context,
    repo: RepoOption = None,
    spark_master: MasterOption = None,
    sample: Annotated[
        int | None, typer.Option(hidden=True, help="Only the first N flights (tests)")
    ] = None,
) -> None:
    """Land the raw CSV files, clean and join them on Spark, write the curated tables through
    the timeline, and print rows, timelines, provenance, lineage and one answer."""
    run_and_print(cli_context(ctx), repo, spark_master, sample)
