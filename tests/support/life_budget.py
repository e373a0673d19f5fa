"""The life test's budget (environment) and its figures (printed after each test, appended
as JSON lines to $FLOWLEDGER_LIFE_FIGURES when set, which `make soak` sums up)."""

from __future__ import annotations

import json
import os
from collections import Counter

#: Tables (hypothesis examples) per test, and the most steps each lives.
EXAMPLES = int(os.environ.get("FLOWLEDGER_LIFE_EXAMPLES", "10"))
STEPS = int(os.environ.get("FLOWLEDGER_LIFE_STEPS", "30"))
#: Soak rounds keep no example database, so a round's seed alone replays it.
SOAK = os.environ.get("FLOWLEDGER_LIFE_SOAK", "") == "1"
#: Shrink a failure outside a soak too.
SHRINK = os.environ.get("FLOWLEDGER_LIFE_SHRINK", "") == "1"


def report_figures(name: str, figures: Counter[str]) -> None:
    line = {"test": name, **dict(sorted(figures.items()))}
    print("life figures:", json.dumps(line))
    path = os.environ.get("FLOWLEDGER_LIFE_FIGURES")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")
