"""Options every command shares, declared once: `--repo` (accepted before or after the
subcommand), `--table` and `--json`."""

from __future__ import annotations

from typing import Annotated, Protocol

import typer

from timeline import parse_as_of

REPO_HELP = "Repository URI (default ./flowledger-data; env FLOWLEDGER_REPO)"


class _Sources(Protocol):
    """A command's context (typer's, or click's for a parent command)."""

    def get_parameter_source(self, name: str) -> object: ...


def _typed(ctx: _Sources, name: str) -> bool:
    """Whether the option came from the command line. Compared by the member's name: the enum
    (click's `ParameterSource`) is not exported by typer, which may carry its own copy of click."""
    return getattr(ctx.get_parameter_source(name), "name", None) == "COMMANDLINE"


def inherit_repo(ctx: typer.Context, param: typer.CallbackParam, value: str | None) -> str | None:
    """`flowledger --repo X provenance sql ...` and `flowledger provenance sql ... --repo X`
    mean the same: a `--repo` typed after the subcommand wins, then one typed before it (on
    the root command), then FLOWLEDGER_REPO, then the default."""
    if _typed(ctx, param.name or "repo"):
        return value
    parent = ctx.parent
    while parent is not None:
        if _typed(parent, "repo"):
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


def instant_option(ctx: typer.Context, param: typer.CallbackParam, value: str | None) -> str | None:
    """A point in time given on the command line, as an instant time; a refusal names the
    option it was given to and the forms accepted (exit 2, as any bad input)."""
    if value is None:
        return None
    return parse_as_of(value, param.opts[0] if param.opts else param.name or "instant")


_WHEN = "an instant (yyyyMMddHHmmssSSS, yyyyMMddHHmmss or ISO 8601; UTC unless it says)"

# What a table read sees (`table read` and `table sql`): a snapshot, or a keyed table's changes.
AsOfOption = Annotated[
    str | None,
    typer.Option("--as-of", help=f"Read as of {_WHEN}", callback=instant_option),
]
ChangesSinceOption = Annotated[
    str | None,
    typer.Option(
        "--changes-since",
        help=f"Keyed tables: the records changed after {_WHEN} (up to --as-of)",
        callback=instant_option,
    ),
]
CdcOption = Annotated[
    bool, typer.Option("--cdc", help="With --changes-since: one row per change (i/u/d)")
]
FullScanOption = Annotated[
    bool,
    typer.Option(
        "--full-scan", help="With --changes-since: scan the snapshot when slices are gone"
    ),
]
