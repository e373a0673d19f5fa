"""Named crash points for crash-safety tests: FLOWLEDGER_CRASH_AT=<point> SIGKILLs the process."""

from __future__ import annotations

import os
import signal

ENV = "FLOWLEDGER_CRASH_AT"


def point(name: str) -> None:
    if os.environ.get(ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)
