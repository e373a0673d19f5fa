"""What one CLI invocation chose on its root command, handed to every subcommand explicitly.

The root callback builds a `CliContext` and stores it in typer's context object (`ctx.obj`,
as pyiceberg's CLI keeps its catalog there); a subcommand asks `cli_context(ctx)`. Nothing is
kept in a module global, so two invocations in one process (tests, a program embedding the
CLI) never see each other's choices.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import typer

from provenance import ProvenanceSettings
from timeline import TableSettings


def table_settings(auto_archive: bool = True) -> TableSettings:
    """Default table settings, with automatic archival on or off (hoodie.archive.automatic)."""
    base = TableSettings()
    if auto_archive:
        return base
    return replace(base, archival=replace(base.archival, auto_archive=False))


def provenance_settings(auto_archive: bool = True) -> ProvenanceSettings:
    """Provenance settings whose own table follows the same archival switch."""
    return ProvenanceSettings(table=table_settings(auto_archive))


@dataclass(frozen=True)
class CliContext:
    """The root command's options, for every subcommand of one invocation."""

    #: `--auto-archive/--no-auto-archive` (env FLOWLEDGER_AUTO_ARCHIVE): archival after
    #: commits, for every table a command opens, the provenance repository's table included.
    auto_archive: bool = True

    def table_settings(self) -> TableSettings:
        return table_settings(self.auto_archive)

    def provenance_settings(self) -> ProvenanceSettings:
        return provenance_settings(self.auto_archive)


def cli_context(ctx: typer.Context) -> CliContext:
    """The invocation's context, found from any subcommand (click walks up to the root); the
    defaults when a sub-application runs on its own, without the root command."""
    found = ctx.find_object(CliContext)
    return found if found is not None else CliContext()
