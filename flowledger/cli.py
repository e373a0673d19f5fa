"""The `flowledger` command line (typer). Errors go to stderr as one line, exit code 1."""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.console import Console

from .commands import content
from .commands import pipeline as pipeline_cmd
from .commands import provenance as provenance_cmd
from .commands import table as table_cmd
from .commands import timeline as timeline_cmd
from .errors import REPORTED, one_line

app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
RepoOption = Annotated[
    str | None,
    typer.Option(
        "--repo", envvar="FLOWLEDGER_REPO", help="Repository URI (default ./flowledger-data)"
    ),
]
app.add_typer(content.app, name="content")
app.add_typer(provenance_cmd.app, name="provenance")
app.add_typer(timeline_cmd.app, name="timeline")
app.add_typer(table_cmd.app, name="table")
app.add_typer(pipeline_cmd.app, name="pipeline")


@app.callback()
def root() -> None:
    """flowledger: content, provenance and an ACID timeline on object storage."""


@app.command()
def demo(
    repo: RepoOption = None,
    spark_master: Annotated[str | None, typer.Option(help="Spark master URL")] = None,
) -> None:
    """Run the NYC flights 2013 pipeline (`flowledger pipeline run`) on the repository."""
    pipeline_cmd.run_and_print(repo, spark_master)


@app.command()
def tour(repo: RepoOption = None) -> None:
    """A tour of every feature on synthetic data (object store, timeline, content, provenance)."""
    from .demo import run_demo

    run_demo(repo, Console())


@app.command()
def serve(
    repo: RepoOption = None,
    host: Annotated[str, typer.Option(help="Interface to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port")] = 8080,
) -> None:
    """Serve the HTTP API (read-only SQL, events, lineage, timeline) with uvicorn."""
    from .service import serve as run_server

    run_server(repo, host, port)


def main() -> None:
    try:
        app()  # click handles usage errors and --help itself
    except REPORTED as exc:
        print(f"flowledger: error: {one_line(exc)}", file=sys.stderr)
        sys.exit(1)
