"""The `flowledger` command line (typer). Errors go to stderr as one line, exit code 1."""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.console import Console

from .commands import content
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


@app.callback()
def root(
    auto_archive: Annotated[
        bool,
        typer.Option(
            "--auto-archive/--no-auto-archive",
            envvar="FLOWLEDGER_AUTO_ARCHIVE",
            help="Archive old instants after commits (hoodie.archive.automatic; keep 20-30)",
        ),
    ] = True,
) -> None:
    """flowledger: content, provenance and an ACID timeline on object storage."""
    if not auto_archive:
        from timeline.archive import set_default

        set_default(None)


@app.command()
def demo(repo: RepoOption = None) -> None:
    """Run everything that works so far, end to end, on the repository."""
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
