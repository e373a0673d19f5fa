"""Per-step measurements inside an upsert-benchmark worker process (standard library only: the
Hudi worker imports it from its own Spark 3.5 virtualenv).

Peak memory per step: Linux keeps a process's peak resident set (VmHWM); writing "5" to
/proc/PID/clear_refs resets it to the current RSS, so the peak read after a step is the step's
own peak, not the load's. The Spark driver JVM is a separate process and is measured the same way.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def reset_peak(pid: int) -> bool:
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def rss_bytes(pid: int) -> int | None:
    """VmRSS of `pid`, in bytes (None off Linux): what a step's peak starts from."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def peak_bytes(pid: int) -> int | None:
    """VmHWM of `pid`, in bytes (None off Linux)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


class Recorder:
    """Collects one worker's results and writes them as JSON for the orchestrator."""

    def __init__(self, system: str, out: Path) -> None:
        self.out = out
        self.result: dict[str, Any] = {"system": system, "steps": [], "info": {}}
        #: the Spark driver JVM, when there is one
        self.jvm_pid: int | None = None

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[dict[str, Any]]:
        """Times the block; it may fill the yielded dict (index lookup ms, system metrics)."""
        pids = [os.getpid()] + ([self.jvm_pid] if self.jvm_pid else [])
        for pid in pids:
            reset_peak(pid)
        # The resident set the step starts from (its peak is at least this): what the
        # process still holds of earlier steps, told apart from what the step adds.
        rss = rss_bytes(os.getpid())
        extra: dict[str, Any] = {} if rss is None else {"rss_at_start_mib": rss >> 20}
        start, t0, cpu0 = time.time(), time.perf_counter(), os.times()
        error = None
        try:
            yield extra
        except Exception as exc:  # recorded, then the worker moves on to its next step
            error = f"{type(exc).__name__}: {exc}".splitlines()[0][:400]
            traceback.print_exc()
        seconds = time.perf_counter() - t0
        cpu1 = os.times()
        # CPU seconds of this process (all its threads) in the step: unlike wall time, robust
        # to other work on the machine.
        extra["cpu_s"] = round(cpu1.user + cpu1.system - cpu0.user - cpu0.system, 2)
        extra["cpu_sys_s"] = round(cpu1.system - cpu0.system, 2)  # the kernel's share
        self.result["steps"].append(
            {
                "name": name,
                "start": start,
                "end": time.time(),
                "seconds": seconds,
                "peak_rss": peak_bytes(os.getpid()),
                "jvm_peak_rss": peak_bytes(self.jvm_pid) if self.jvm_pid else None,
                "error": error,
                **extra,
            }
        )
        self.save()

    def annotate(self, more: dict[str, Any]) -> None:
        """Add to the last step's record what is known only after it (read off the clock)."""
        self.result["steps"][-1].update(more)
        self.save()

    def save(self) -> None:
        self.out.write_text(json.dumps(self.result, indent=1, default=str))
