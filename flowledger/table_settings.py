"""The table settings of this CLI process, chosen by the root command's options.

`--no-auto-archive` (env FLOWLEDGER_AUTO_ARCHIVE=0) turns automatic archival off for every
table a command opens: timeline and table commands, and the provenance repository's table
(CLI commands and `serve`).
"""

from __future__ import annotations

from dataclasses import replace

from provenance import ProvenanceSettings
from timeline import TableSettings

_auto_archive = True


def set_auto_archive(on: bool) -> None:
    """Called by the root command on every invocation (so an in-process run does not leak
    into the next one)."""
    global _auto_archive
    _auto_archive = on


def table_settings() -> TableSettings:
    base = TableSettings()
    if _auto_archive:
        return base
    return replace(base, archival=replace(base.archival, auto_archive=False))


def provenance_settings() -> ProvenanceSettings:
    """Provenance settings whose table follows the switch (the repository's own table)."""
    return ProvenanceSettings(table=table_settings())
