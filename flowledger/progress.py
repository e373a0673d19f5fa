"""Progress of long CLI operations: a rich progress bar on a terminal; elsewhere (logs, pipes,
CI) a plain line on stderr every few seconds once an operation is slow — a quick one prints
nothing; nothing at all with `--json` or `quiet`.

Four shapes: bytes moved through a stream (`progress` + `CountingReader/Writer`), bytes of a
file read by code that opens it itself (`reading`, e.g. ingest), units an operation reports
through its progress callback (`steps`: rollover's journals, expiry's files, archival's steps),
and an operation with no measure of its own (`activity`: a spinner and the elapsed time)."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, BinaryIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

PLAIN_EVERY_S = 5.0  # at most one plain line per this many seconds (and one at the end)


TICK_S = 0.2  # how often a watched file's position is read, and a plain line considered


class Reporter:
    """`advance(n)` as work gets done; `total` may be unknown (None). `counts_bytes=False`:
    with a `unit`, a bar of that many units (`callback` is what a library operation takes);
    without, an activity without a measure (spinner and elapsed time; plain lines say how
    long)."""

    def __init__(
        self,
        description: str,
        total: int | None,
        *,
        quiet: bool = False,
        console: Console | None = None,
        stream: IO[str] | None = None,
        counts_bytes: bool = True,
        unit: str = "",
    ) -> None:
        self.description = description
        self.total = total
        self.counts_bytes = counts_bytes
        self.unit = unit
        self.done = 0
        self._stream = stream or sys.stderr
        self._console = console or Console(file=self._stream)
        self._quiet = quiet
        self._bar: Progress | None = None
        self._task = None
        self._started = self._last_line = time.monotonic()
        self._printed = False
        if not quiet and self._console.is_terminal:
            columns: tuple[ProgressColumn, ...] = (
                (
                    TextColumn("{task.description}"),
                    BarColumn(),
                    DownloadColumn(),
                    TransferSpeedColumn(),
                    TimeRemainingColumn(),
                )
                if counts_bytes
                else (
                    TextColumn("{task.description}"),
                    BarColumn(),
                    MofNCompleteColumn(),
                    TextColumn(unit),
                    TimeElapsedColumn(),
                )
                if unit
                else (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
            )
            self._bar = Progress(*columns, console=self._console, transient=True)
            self._bar.start()
            self._task = self._bar.add_task(description, total=total)

    def advance(self, n: int) -> None:
        self.done += n
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, advance=n)
        else:
            self.tick()

    def callback(self, advance: int, total: int | None) -> None:
        """A `storage.ProgressCallback`: the total when it is news, then units done."""
        if total is not None and total != self.total:
            self.total = total
            if self._bar is not None and self._task is not None:
                self._bar.update(self._task, total=total)
        if advance:
            self.advance(advance)

    def tick(self) -> None:
        """A plain line if the last one is old enough (called on every advance and by the
        ticker of `reading`/`activity`, which also report while nothing advances)."""
        due = time.monotonic() - self._last_line >= PLAIN_EVERY_S
        if self._bar is None and not self._quiet and due:
            self._line()

    def _line(self, final: bool = False) -> None:
        self._printed = True
        self._last_line = time.monotonic()
        elapsed = self._last_line - self._started
        if self.unit:
            of = f" of {self.total}" if self.total is not None else ""
            text = f"{self.description}: {self.done}{of} {self.unit} in {elapsed:.0f} s"
        elif not self.counts_bytes:
            state = "done in" if final else "running for"
            text = f"{self.description}: {state} {elapsed:.0f} s"
        elif self.total:
            pct = 100 * self.done // max(self.total, 1)
            text = f"{self.description}: {pct}% ({self.done} of {self.total} bytes)"
        else:
            text = f"{self.description}: {self.done} bytes"
        print(text, file=self._stream, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
        elif not self._quiet and self._printed:
            self._line(final=True)  # the final figure, after earlier lines


@contextlib.contextmanager
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


class _Ticker(threading.Thread):
    """Every TICK_S: move the reporter to what `poll` says is done, and let it print a plain
    line when one is due (an operation that reports nothing itself still shows it is alive)."""

    def __init__(self, reporter: Reporter, poll: Callable[[], int | None] | None) -> None:
        super().__init__(name="flowledger-progress", daemon=True)
        self._reporter = reporter
        self._poll = poll
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.wait(TICK_S):
            done = self._poll() if self._poll is not None else None
            if done is not None and done > self._reporter.done:
                self._reporter.advance(done - self._reporter.done)
            else:
                self._reporter.tick()

    def stop(self) -> None:
        self._done.set()
        self.join()


def read_position(path: Path) -> int | None:
    """How far this process has read `path` (the offset of a descriptor open on it, as `pv -d`
    watches another reader): None if it is not open or the platform has no /proc."""
    target = os.path.realpath(path)
    try:
        fds = os.listdir("/proc/self/fd")
    except OSError:
        return None
    for fd in fds:
        try:
            if os.readlink(f"/proc/self/fd/{fd}") != target:
                continue
            with open(f"/proc/self/fdinfo/{fd}") as info:
                for line in info:
                    if line.startswith("pos:"):
                        return int(line.split()[1])
        except (OSError, ValueError):
            continue  # closed meanwhile, or not ours to read
    return None


@contextlib.contextmanager
def _ticking(reporter: Reporter, poll: Callable[[], int | None] | None) -> Iterator[Reporter]:
    ticker = _Ticker(reporter, poll)
    ticker.start()
    try:
        yield reporter
        if reporter.total is not None and reporter.done < reporter.total:
            reporter.advance(reporter.total - reporter.done)  # finished: all of it was read
    finally:
        ticker.stop()
        reporter.close()


def reading(
    path: Path,
    description: str,
    *,
    quiet: bool = False,
    console: Console | None = None,
    stream: IO[str] | None = None,
) -> contextlib.AbstractContextManager[Reporter]:
    """Progress of code in this process reading `path` (bytes read of its size) while the
    block runs, for code that opens the file itself (the provenance ingest)."""
    total = path.stat().st_size
    reporter = Reporter(description, total, quiet=quiet, console=console, stream=stream)
    return _ticking(reporter, lambda: read_position(path))


def activity(
    description: str,
    *,
    quiet: bool = False,
    console: Console | None = None,
    stream: IO[str] | None = None,
) -> contextlib.AbstractContextManager[Reporter]:
    """A long operation without a measure of its own: a spinner and the elapsed time on a
    terminal, `<description>: running for N s` lines elsewhere."""
    return steps(description, "", quiet=quiet, console=console, stream=stream)


def steps(
    description: str,
    unit: str,
    *,
    quiet: bool = False,
    console: Console | None = None,
    stream: IO[str] | None = None,
) -> contextlib.AbstractContextManager[Reporter]:
    """A long operation that reports its units (`reporter.callback` as its progress, e.g.
    rollover's journals): a bar of done/total `unit` on a terminal, `<description>: N of M
    <unit> in S s` lines elsewhere (no `unit`: see `activity`)."""
    reporter = Reporter(
        description,
        None,
        quiet=quiet,
        console=console,
        stream=stream,
        counts_bytes=False,
        unit=unit,
    )
    return _ticking(reporter, None)


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
