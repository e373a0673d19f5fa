"""Progress of long operations (rollover, expiry, archival), for callers that show it.

The operation calls `progress(advance, total)` from the thread that called it: `advance` more
units are done (0 when only the total is news), `total` is the number of units in all once
known or when it changed (None: no news). Units are the operation's own (journals, files,
instants); a caller draws a bar from them (the CLI) or ignores them (None, the default)."""

from __future__ import annotations

from typing import Protocol


class ProgressCallback(Protocol):
    def __call__(self, advance: int, total: int | None) -> None: ...


def report_progress(
    progress: ProgressCallback | None, advance: int, total: int | None = None
) -> None:
    """Call `progress` if there is one (so operations need no `if` at each step)."""
    if progress is not None:
        progress(advance, total)
