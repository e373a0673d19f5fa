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


def point(name: str) -> None:
    if os.environ.get(ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)
