"""Progress of long CLI operations: a rich progress bar on a terminal; elsewhere (logs, pipes,
CI) a plain line on stderr every few seconds once an operation is slow — a quick one prints
nothing; nothing at all with `--json` or `quiet`."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, BinaryIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

PLAIN_EVERY_S = 5.0  # at most one plain line per this many seconds (and one at the end)


class Reporter:
    """`advance(n)` as work gets done; `total` may be unknown (None)."""

    def __init__(
        self,
        description: str,
        total: int | None,
        *,
        quiet: bool = False,
        console: Console | None = None,
        stream: IO[str] | None = None,
    ) -> None:
        self.description = description
        self.total = total
        self.done = 0
        self._stream = stream or sys.stderr
        self._console = console or Console(file=self._stream)
        self._quiet = quiet
        self._bar: Progress | None = None
        self._task = None
        self._started = self._last_line = time.monotonic()
        self._printed = False
        if not quiet and self._console.is_terminal:
            self._bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                DownloadColumn(),
                TransferSpeedColumn(),
                TimeRemainingColumn(),
                console=self._console,
                transient=True,
            )
            self._bar.start()
            self._task = self._bar.add_task(description, total=total)

    def advance(self, n: int) -> None:
        self.done += n
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, advance=n)
        elif not self._quiet and time.monotonic() - self._last_line >= PLAIN_EVERY_S:
            self._line()

    def _line(self) -> None:
        self._printed = True
        self._last_line = time.monotonic()
        if self.total:
            pct = 100 * self.done // max(self.total, 1)
            text = f"{self.description}: {pct}% ({self.done} of {self.total} bytes)"
        else:
            text = f"{self.description}: {self.done} bytes"
        print(text, file=self._stream, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
        elif not self._quiet and self._printed:
            self._line()  # the final figure, after earlier lines


@contextmanager
def progress(
    description: str,
    total: int | None,
    *,
    quiet: bool = False,
    console: Console | None = None,
    stream: IO[str] | None = None,
) -> Iterator[Reporter]:
    reporter = Reporter(description, total, quiet=quiet, console=console, stream=stream)
    try:
        yield reporter
    finally:
        reporter.close()


class CountingReader:
    """A read-only stream that reports the bytes read through it."""

    def __init__(self, inner: BinaryIO, reporter: Reporter) -> None:
        self._inner = inner
        self._reporter = reporter

    def read(self, n: int = -1) -> bytes:
        data = self._inner.read(n)
        self._reporter.advance(len(data))
        return data


class CountingWriter:
    """A write-only stream that reports the bytes written through it."""

    def __init__(self, inner: BinaryIO, reporter: Reporter) -> None:
        self._inner = inner
        self._reporter = reporter

    def write(self, data: bytes) -> int:
        n = self._inner.write(data)
        self._reporter.advance(len(data))
        return n
