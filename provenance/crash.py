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


def point(name: str) -> None:
    """SIGKILL here if FLOWLEDGER_CRASH_AT is `name`, or `name#N` and this is its N-th hit
    (the count lives in the variable itself, counted down at each earlier hit)."""
    at = os.environ.get(ENV)
    if at is None or not (at == name or at.startswith(name + "#")):
        return
    left = 1 if at == name else int(at.removeprefix(name + "#"))
    if left <= 1:
        os.kill(os.getpid(), signal.SIGKILL)
    os.environ[ENV] = f"{name}#{left - 1}"
