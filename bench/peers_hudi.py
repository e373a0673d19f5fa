"""Summary tables, with ratios flowledger/Hudi, from one round of `../shared/peers/hudi`.

Reads only the raw results that `run_round.sh ROUND N` (and optionally `run_extras.sh
hudi_multi`) leave in `/tmp/hudi-peer/results/rROUND`: the per-run summaries `analyze.py`
wrote (`NAME.summary.json`), the run files (`NAME.json`), the multi-writer summaries and
`uptime.txt`. Prints markdown tables for docs/benchmarks.md.

    python -m bench.peers_hudi /tmp/hudi-peer/results/r3 [--hudi-multi extras/hudi_multi.json]
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

SINGLE = [
    ("hudi_md_on", "Hudi (metadata on)"),
    ("hudi_md_off", "Hudi (metadata off)"),
    ("fl_api", "flowledger API"),
    ("fl_cli", "flowledger CLI"),
]
# Ratio columns: flowledger run / Hudi run, both from the same round.
RATIOS = [
    ("fl_api", "hudi_md_off"),
    ("fl_api", "hudi_md_on"),
    ("fl_cli", "hudi_md_off"),
    ("fl_cli", "hudi_md_on"),
]
SHORT = {"fl_api": "API", "fl_cli": "CLI", "hudi_md_off": "Hudi md off", "hudi_md_on": "Hudi md on"}
METHODS = ("GET", "HEAD", "PUT", "LIST", "DELETE", "POST")


def _load(path: Path) -> Any:
    return json.loads(path.read_text()) if path.exists() else None


def _ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b == 0:
        return "-"
    r = a / b
    return f"{r:.3f}" if r < 0.1 else f"{r:.2f}"


def _num(x: float | None, fmt: str = "{:.1f}") -> str:
    return "n/a" if x is None else fmt.format(x)


def single_writer(d: Path) -> str:
    summ = {k: _load(d / f"{k}.summary.json") for k, _ in SINGLE}
    runs = {k: _load(d / f"{k}.json") for k, _ in SINGLE}
    n = max((s["commits"] for s in summ.values() if s), default=0)
    first = min(10, n)
    m = "mean_from_2"
    head = [
        "metric",
        *(label for _, label in SINGLE),
        *(f"{SHORT[a]} / {SHORT[b]}" for a, b in RATIOS),
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]

    def row(label: str, get: Any, fmt: str = "{:.1f}", ratio: bool = True) -> None:
        vals: dict[str, float | None] = {}
        cells = []
        for k, _ in SINGLE:
            try:
                v = get(summ[k], runs[k]) if summ[k] else None
            except (KeyError, TypeError):
                v = None
            vals[k] = v
            cells.append(_num(v, fmt) if not isinstance(v, str) else v)
        rs = [_ratio(vals[a], vals[b]) if ratio else "" for a, b in RATIOS]
        lines.append(f"| {label} | " + " | ".join(cells + rs) + " |")

    for c in METHODS:
        row(f"{c} / commit", lambda s, r, c=c: s[m][c])
    row("**total requests / commit**", lambda s, r: s[m]["TOTAL"])
    row("of which 404", lambda s, r: s[m]["404"], ratio=False)
    row("of which 412", lambda s, r: s[m]["412"], ratio=False)
    row("KB up / commit", lambda s, r: s[m]["KB_up"])
    row("KB down / commit", lambda s, r: s[m]["KB_down"])
    row("**ms / commit, median**", lambda s, r: s["ms_median_from_2"], "{:.0f}")
    row("ms / commit, mean", lambda s, r: s["ms_mean_from_2"], "{:.0f}")
    row("ms / commit, p90", lambda s, r: s["ms_p90_from_2"], "{:.0f}")
    row(f"requests at commit {first}", lambda s, r: s["at_commit"][str(first)]["total"], "{:.0f}")
    row(f"requests at commit {n}", lambda s, r: s["at_commit"][str(n)]["total"], "{:.0f}")
    row(f"mean requests, commits 2-{min(11, n)}", lambda s, r: s["mean_2_11"])
    row(f"mean requests, commits {max(1, n - 9)}-{n}", lambda s, r: s["mean_91_100"])
    row(
        "commit 1 (creates the table): requests",
        lambda s, r: s["at_commit"]["1"]["total"],
        "{:.0f}",
    )
    row("commit 1: ms", lambda s, r: s["ms_first"], "{:.0f}")
    row("errors", lambda s, r: s["errors"], "{:.0f}", ratio=False)
    row(
        "CLI start-up alone, ms (median of 5 `table write --help`)",
        lambda s, r: r["startup_ms_median"],
        "{:.0f}",
        ratio=False,
    )
    row("rows read back", lambda s, r: _rows_read(r), "{:.0f}", ratio=False)
    return "\n".join(lines)


def _rows_read(run: dict[str, Any]) -> float | None:
    check = run.get("check") or {}
    if "rows_read" in check:
        return float(check["rows_read"])
    found = re.search(r"\d+", check.get("stdout", ""))  # CLI `table read --count --json`
    return float(found.group()) if found else None


def multi_writer(d: Path, hudi_multi: Path | None) -> str:
    api = _load(d / "fl_multi_api.json")
    cli = _load(d / "fl_multi_cli.json")
    hudi = _load(hudi_multi) if hudi_multi else None
    if hudi_multi and hudi:
        hudi["requests_per_commit"] = _hudi_requests_per_commit(hudi_multi, hudi)
    cols = [("flowledger API, 4 processes", api), ("flowledger CLI, 4 process loops", cli)]
    if hudi:
        cols.append(("Hudi, 4 threads in one driver (OCC, InProcessLockProvider)", hudi))
    lines = [
        "| metric | " + " | ".join(c for c, _ in cols) + " |",
        "|" + " --- |" * (len(cols) + 1),
    ]

    def get(s: dict[str, Any] | None, *keys: str) -> Any:
        for k in keys:
            if s and k in s:
                return s[k]
        return None

    def row(label: str, f: Any) -> None:
        lines.append(f"| {label} | " + " | ".join(f(s) if s else "n/a" for _, s in cols) + " |")

    row("commits / s (wall)", lambda s: f"{get(s, 'commits_per_s'):.2f}")
    row("wall s", lambda s: f"{get(s, 'wall_s'):.1f}")
    row(
        "committed / conflicts or failures",
        lambda s: f"{get(s, 'committed')} / {get(s, 'conflicts_or_failures', 'failed')}",
    )
    row("latency median / p90, ms", lambda s: _latency(s))
    row("requests / commit", lambda s: _num(get(s, "requests_per_commit")))
    row(
        "log-position PUTs / lost to 412",
        lambda s: (
            f"{s['log_put_attempts']} / {s['log_put_412_lost_positions']}"
            if "log_put_attempts" in s
            else "-"
        ),
    )
    row("log sequence gapless", lambda s: str(s.get("seq_gapless", "-")))
    row(
        "rows read back / expected",
        lambda s: f"{s['rows_read']} / {s['expected_rows']}" if "rows_read" in s else "-",
    )
    if api and hudi:
        lines.append("")
        lines.append(
            f"Ratio commits/s flowledger API / Hudi: "
            f"{_ratio(api['commits_per_s'], hudi['commits_per_s'])}; "
            f"CLI / Hudi: {_ratio(cli['commits_per_s'], hudi['commits_per_s'])}."
            if cli
            else ""
        )
    return "\n".join(lines)


def _hudi_requests_per_commit(run: Path, summary: dict[str, Any]) -> float | None:
    """Proxy-log requests inside the writers' window, per successful commit."""
    log = run.with_suffix(".proxy.log")
    commits = summary.get("commits") or []
    if not log.exists() or not commits or not summary.get("committed"):
        return None
    t0 = min(c["start"] for c in commits)
    t1 = max(c["end"] for c in commits)
    n = 0
    for line in log.read_text().splitlines():
        t = line.split("\t", 1)[0]
        if t.replace(".", "", 1).isdigit() and t0 <= float(t) <= t1:
            n += 1
    return n / int(summary["committed"])


def _latency(s: dict[str, Any]) -> str:
    if "latency_ms_median" in s:
        return f"{s['latency_ms_median']:.0f} / {s['latency_ms_p90']:.0f}"
    ok = sorted((c["end"] - c["start"]) * 1000 for c in s.get("commits", []) if not c["error"])
    if not ok:
        return "n/a"
    return f"{ok[len(ok) // 2]:.0f} / {ok[max(0, int(len(ok) * 0.9) - 1)]:.0f}"


def load_table(d: Path, extra: Path | None) -> str:
    """Load averages (1, 5, 15 min) before and after each run, from run_round's uptime.txt."""
    lines = [
        "| run | start (UTC) | load before | end (UTC) | load after |",
        "| --- | --- | --- | --- | --- |",
    ]
    seen: dict[str, dict[str, tuple[str, str]]] = {}
    for f in (d / "uptime.txt", extra):
        if f is None or not f.exists():
            continue
        for line in f.read_text().splitlines():
            m = re.match(r"(\S+)-(before|after) \S*T(\d\d:\d\d:\d\d)Z .*load average: (.*)$", line)
            if m:
                seen.setdefault(m[1], {})[m[2]] = (m[3], m[4].strip())
    for name, v in seen.items():
        b, a = v.get("before", ("?", "?")), v.get("after", ("?", "?"))
        lines.append(f"| {name} | {b[0]} | {b[1]} | {a[0]} | {a[1]} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("results", type=Path, help="a round's folder, e.g. /tmp/hudi-peer/results/r3")
    p.add_argument("--hudi-multi", type=Path, help="hudi_multi.json from run_extras.sh")
    a = p.parse_args(argv)
    extra_uptime = a.hudi_multi.parent / "uptime.txt" if a.hudi_multi else None
    print(single_writer(a.results), end="\n\n")
    print(multi_writer(a.results, a.hudi_multi), end="\n\n")
    print(load_table(a.results, extra_uptime))


if __name__ == "__main__":
    main()
