"""Expiry (NiFi's): by total size (oldest files first, down to 90% of the limit) and by age;
journals, the files still being written, are never expired. Executed as a replacecommit
plus a clean on the provenance timeline, so every reader sees the files go at once."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from storage import ProgressCallback, report_progress, timeutil

from .catalog import EventFile
from .settings import ProvenanceSettings
from .table import ProvenanceTable, instant_ms


@dataclass(frozen=True)
class ExpiryPlan:
    by_size: tuple[EventFile, ...]
    by_age: tuple[EventFile, ...]

    @property
    def files(self) -> tuple[EventFile, ...]:
        return self.by_size + self.by_age

    @property
    def events(self) -> int:
        return sum(f.rows for f in self.files)

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.files)


def plan_expiry(
    files: Sequence[EventFile],
    max_storage_size: int,
    max_storage_time_s: float,
    now_ms: int | None = None,
) -> ExpiryPlan:
    now_ms = timeutil.now_ms() if now_ms is None else now_ms
    oldest_first = sorted(files, key=lambda f: f.first_id)  # names are an increasing number
    total = sum(f.size for f in oldest_first)
    by_size: list[EventFile] = []
    if total > max_storage_size:
        target = 0.9 * max_storage_size
        for f in oldest_first:
            if total <= target:
                break
            by_size.append(f)
            total -= f.size
    chosen = {f.first_id for f in by_size}
    cutoff = now_ms - max_storage_time_s * 1000
    by_age = []
    for f in oldest_first:
        if f.first_id in chosen:
            continue
        rolled = instant_ms(f.events_key)
        if rolled is not None and rolled < cutoff:
            by_age.append(f)
    return ExpiryPlan(tuple(by_size), tuple(by_age))


def plan_for(
    table: ProvenanceTable, settings: ProvenanceSettings, now_ms: int | None = None
) -> ExpiryPlan:
    """The expiry plan of the committed files as they are now."""
    files = table.committed(fresh=True).files
    return plan_expiry(files, settings.max_storage_size, settings.max_storage_time_s, now_ms)


def expire(
    table: ProvenanceTable,
    settings: ProvenanceSettings,
    now_ms: int | None = None,
    progress: ProgressCallback | None = None,
) -> ExpiryPlan:
    """Expire what `plan_for` marks. `progress` counts files: told how many up front, all
    done once they are replaced (one replacecommit) and deleted (one clean); neither step
    has a per-file request."""
    plan = plan_for(table, settings, now_ms)
    report_progress(progress, 0, len(plan.files))
    if plan.files:
        committed = table.committed(fresh=True)
        reason = f"{len(plan.by_size)} by size, {len(plan.by_age)} by age"
        table.expire(plan.files, committed.high_water, reason)
        report_progress(progress, len(plan.files))
    return plan
