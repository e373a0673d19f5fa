"""Options every command shares, declared once: `--repo` (accepted before or after the
subcommand), `--table` and `--json`."""

from __future__ import annotations

from typing import Annotated

import typer
from typer._click.core import ParameterSource  # typer's vendored click

REPO_HELP = "Repository URI (default ./flowledger-data; env FLOWLEDGER_REPO)"


def inherit_repo(ctx: typer.Context, param: typer.CallbackParam, value: str | None) -> str | None:
    """`flowledger --repo X provenance sql ...` and `flowledger provenance sql ... --repo X`
    mean the same: a `--repo` typed after the subcommand wins, then one typed before it (on
    the root command), then FLOWLEDGER_REPO, then the default."""
    if ctx.get_parameter_source(param.name or "repo") is ParameterSource.COMMANDLINE:
        return value
    parent = ctx.parent
    while parent is not None:
        if parent.get_parameter_source("repo") is ParameterSource.COMMANDLINE:
            inherited = parent.params.get("repo")
            return inherited if isinstance(inherited, str) else value
        parent = parent.parent
    return value


RepoOption = Annotated[
    str | None,
    typer.Option("--repo", envvar="FLOWLEDGER_REPO", help=REPO_HELP, callback=inherit_repo),
]
# On the root command: only records the value for the subcommand's RepoOption to inherit.
RootRepoOption = Annotated[
    str | None, typer.Option("--repo", help=REPO_HELP + "; also accepted after the subcommand")
]
TableOption = Annotated[
    str | None,
    typer.Option(
        "--table",
        envvar="FLOWLEDGER_TABLE",
        help="Table URI, e.g. ./flowledger-data/tables/t1 or s3://bucket/tables/t1",
    ),
]
JsonOption = Annotated[
    bool, typer.Option("--json", help="Machine-readable output (one JSON document on stdout)")
]

# Keyed tables' change reads (`table read` and `table sql`).
CdcOption = Annotated[
    bool, typer.Option("--cdc", help="With --changes-since: one row per change (i/u/d)")
]
FullScanOption = Annotated[
    bool,
    typer.Option(
        "--full-scan", help="With --changes-since: scan the snapshot when slices are gone"
    ),
]
