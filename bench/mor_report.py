"""The merge-on-read benchmark's tables: per step and system the wall time, requests and
bytes, the ratios the goals are stated in (merge-on-read / copy-on-write upsert, snapshot /
read-optimized read, flowledger / Hudi), and whether each snapshot read returned the expected
rows (count and `qty` checksum)."""

from __future__ import annotations

from statistics import mean

from rich.console import Console

from bench.common import table
from bench.mor_data import MorInputs
from bench.side_by_side import StepResult, SystemResult

LABELS = {
    "flowledger-cow": "flowledger copy-on-write",
    "flowledger-mor": "flowledger merge-on-read",
    "hudi": "Hudi merge-on-read (Spark)",
}
MiB = 1024 * 1024
console = Console(width=150)


def _ratio(value: float | None, base: float | None) -> str:
    return "-" if value is None or not base else f"{value / base:.2f}x"


def _ok(s: StepResult | None) -> StepResult | None:
    return s if s is not None and not s.error else None


def _secs(s: StepResult | None) -> float | None:
    return s.seconds if s is not None and not s.error else None


def _check(inputs: MorInputs, n: int, s: StepResult) -> str:
    want = inputs.expected.get(str(n))
    got = (s.extra.get("rows"), s.extra.get("qty_sum"))
    if want is None:
        return f"{got[0]:,} rows" if got[0] is not None else "-"
    return "ok" if got == (want.rows, want.qty_sum) else f"DIFFERS ({got[0]:,} rows)"


def report(inputs: MorInputs, results: list[SystemResult]) -> None:
    ran = [r for r in results if not r.unavailable]
    by = {r.system: r for r in ran}
    hudi = by.get("hudi")
    w = inputs.workload

    def vs_hudi(system: str, step: str) -> str:
        if system == "hudi" or hudi is None:
            return "-"
        return _ratio(_secs(by[system].steps.get(step)), _secs(hudi.steps.get(step)))

    def write_table(title: str, step: str, changed: int) -> None:
        t = table(
            title,
            "system",
            "seconds",
            "vs copy-on-write",
            "vs Hudi",
            "requests",
            "by kind",
            "MiB up",
            "up / changed",
            "peak RSS MiB",
            "JVM peak MiB",
        )
        cow = _secs(by["flowledger-cow"].steps.get(step)) if "flowledger-cow" in by else None
        for r in ran:
            s = r.steps.get(step)
            if s is None:
                continue
            if s.error:
                t.add_row(LABELS[r.system], "error", s.error[:60], *["-"] * 7)
                continue
            t.add_row(
                LABELS[r.system],
                f"{s.seconds:.2f}",
                "-" if r.system == "flowledger-cow" else _ratio(s.seconds, cow),
                vs_hudi(r.system, step),
                str(s.requests.total),
                s.requests.short(),
                f"{s.requests.bytes_up / MiB:.1f}",
                f"{s.requests.bytes_up / changed:.2f}" if changed else "-",
                "-" if s.peak_rss is None else f"{s.peak_rss / MiB:,.0f}",
                "-" if s.jvm_peak_rss is None else f"{s.jvm_peak_rss / MiB:,.0f}",
            )
        console.print(t)

    loaded = sum(s.bytes for s in inputs.loads)
    write_table(
        f"load: {w.rows:,} rows in {w.load_batches} commits, {w.partitions} partitions",
        "load",
        loaded,
    )
    first = inputs.upserts[0]
    write_table(
        f"upsert of {first.rows:,} random keys (80 % updates), "
        f"{first.bytes / MiB:.1f} MiB as Parquet (zstd): the first delta commit",
        first.name,
        first.bytes,
    )

    later = [s.name for s in inputs.upserts[1:]]
    if later:
        t = table(
            f"delta commits 2-{len(inputs.upserts)} (upserts of the same size)",
            "system",
            "mean s",
            "min s",
            "max s",
            "requests each",
            "MiB up each",
            "up / changed",
        )
        changed = mean(s.bytes for s in inputs.upserts[1:])
        for r in ran:
            got = [s for n in later if (s := _ok(r.steps.get(n))) is not None]
            if not got:
                continue
            secs = [s.seconds for s in got]
            up = mean(s.requests.bytes_up for s in got)
            t.add_row(
                LABELS[r.system],
                f"{mean(secs):.2f}",
                f"{min(secs):.2f}",
                f"{max(secs):.2f}",
                f"{mean(s.requests.total for s in got):,.0f}",
                f"{up / MiB:.1f}",
                f"{up / changed:.2f}",
            )
        console.print(t)

    t = table(
        "reads: full scans of every column (count + qty checksum)",
        "system",
        "delta commits",
        "snapshot s",
        "read-optimized s",
        "snapshot / RO",
        "snapshot vs Hudi",
        "RO vs Hudi",
        "snapshot requests",
        "RO requests",
        "snapshot check",
    )
    for n in [*inputs.reads_at, "compacted"]:
        for r in ran:
            snap = r.steps.get(f"snapshot_{n}")
            ro = r.steps.get(f"read_optimized_{n}")
            if snap is None:
                continue
            if snap.error:
                t.add_row(LABELS[r.system], str(n), "error", snap.error[:50], *["-"] * 6)
                continue
            expect_at = max(inputs.reads_at) if n == "compacted" else int(n)
            t.add_row(
                LABELS[r.system],
                str(n),
                f"{snap.seconds:.2f}",
                f"{_secs(ro):.2f}" if _ok(ro) else "-",
                _ratio(snap.seconds, _secs(ro)),
                vs_hudi(r.system, f"snapshot_{n}"),
                vs_hudi(r.system, f"read_optimized_{n}") if ro else "-",
                snap.requests.short(),
                ro.requests.short() if ro else "-",
                _check(inputs, expect_at, snap),
            )
    console.print(t)

    t = table(
        f"compaction after {len(inputs.upserts)} delta commits",
        "system",
        "seconds",
        "vs Hudi",
        "file groups",
        "rows",
        "rows/s",
        "MiB written",
        "MiB/s",
        "requests",
        "by kind",
    )
    for r in ran:
        s = r.steps.get("compaction")
        if s is None:
            continue
        if s.error:
            t.add_row(LABELS[r.system], "error", s.error[:60], *["-"] * 8)
            continue
        rows, size = s.extra.get("rows"), s.extra.get("bytes_written")
        size = size if size is not None else s.requests.bytes_up
        t.add_row(
            LABELS[r.system],
            f"{s.seconds:.2f}",
            vs_hudi(r.system, "compaction"),
            str(s.extra.get("file_groups", "-")),
            "-" if rows is None else f"{rows:,}",
            "-" if rows is None else f"{rows / s.seconds:,.0f}" + ("" if rows else " (nothing)"),
            f"{size / MiB:.1f}",
            f"{size / MiB / s.seconds:.1f}",
            str(s.requests.total),
            s.requests.short(),
        )
    console.print(t)
    goals(inputs, results)


def goals(inputs: MorInputs, results: list[SystemResult]) -> None:
    by = {r.system: r for r in results if not r.unavailable}
    t = table("goals", "goal", "figure", "met")
    mor, cow, hudi = by.get("flowledger-mor"), by.get("flowledger-cow"), by.get("hudi")
    first = inputs.upserts[0]
    if mor and cow:
        m, c = _secs(mor.steps.get(first.name)), _secs(cow.steps.get(first.name))
        if m and c:
            t.add_row(
                "upsert: merge-on-read <= 20 % of copy-on-write",
                f"{100 * m / c:.0f} %",
                "yes" if m <= 0.2 * c else "no",
            )
    if mor and (s := _ok(mor.steps.get(first.name))):
        amp = s.requests.bytes_up / first.bytes
        t.add_row("upsert: bytes up <= 1.5x changed", f"{amp:.2f}x", "yes" if amp <= 1.5 else "no")
    at = 5 if 5 in inputs.reads_at else inputs.reads_at[0]
    if mor:
        snap = _secs(mor.steps.get(f"snapshot_{at}"))
        ro = _secs(mor.steps.get(f"read_optimized_{at}"))
        if snap and ro:
            t.add_row(
                f"snapshot <= 1.5x read-optimized at {at} delta commits",
                f"{snap / ro:.2f}x",
                "yes" if snap <= 1.5 * ro else "no",
            )
    if mor and hudi:
        behind = [
            n
            for n, s in mor.steps.items()
            if (h := _secs(hudi.steps.get(n))) is not None and (_secs(s) or h + 1) > h
        ]
        common = [n for n in mor.steps if n in hudi.steps]
        t.add_row(
            "ahead of Hudi on every step",
            f"behind on {len(behind)} of {len(common)}"
            + (f": {', '.join(behind)}" if behind else ""),
            "yes" if not behind else "no",
        )
    for r in results:
        if r.unavailable:
            t.add_row(LABELS[r.system], r.unavailable, "-")
        elif r.info:
            t.add_row(LABELS[r.system], ", ".join(f"{k} {v}" for k, v in r.info.items()), "")
    console.print(t)
