"""Named crash points for recovery tests (FLOWLEDGER_CRASH_AT=<point> SIGKILLs the process)."""

from __future__ import annotations

import os
import signal

ENV = "FLOWLEDGER_CRASH_AT"

POINTS = (
    "provenance.rollover.journals_read",
    "provenance.rollover.events_written",
    "provenance.rollover.index_written",
    "provenance.rollover.committed",
    "provenance.rollover.journals_deleted",
)

#: Steps of a durable journal flush: after the id CAS, after the journal is durable but
#: before the writer is told.
INGEST_POINTS = (
    "provenance.journal.allocated",
    "provenance.journal.written",
)

_hits: dict[str, int] = {}


def point(name: str) -> None:
    """SIGKILL here if FLOWLEDGER_CRASH_AT is `name`, or `name#N` and this is its N-th hit."""
    at = os.environ.get(ENV)
    if at is None or not at.startswith(name):
        return
    _hits[name] = hits = _hits.get(name, 0) + 1
    if at == name or at == f"{name}#{hits}":
        os.kill(os.getpid(), signal.SIGKILL)
