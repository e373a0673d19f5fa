"""`make soak`: runs the keyed-table life test round after round, each round with a new
hypothesis seed, until the asked number of steps has run or a round fails; prints every
round's seed and, on a failure, the command that replays it (the failure itself prints the
shrunk steps and a `@reproduce_failure` blob).

    python -m tests.support.life_soak --steps 5000 [--seed N] [--tier unit|minio] [--minutes M]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter

from tests.support.paths import REPO_ROOT

TEST = "tests/timeline/keyed/test_keyed_life.py"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=5000, help="stop after this many steps")
    ap.add_argument("--minutes", type=float, default=0, help="or after this long (0: no limit)")
    ap.add_argument("--seed", type=int, default=None, help="first round's seed (then +1 each)")
    ap.add_argument("--tier", default="unit", choices=["unit", "minio"])
    ap.add_argument("--examples", type=int, default=10, help="tables per test and round")
    ap.add_argument("--table-steps", type=int, default=60, help="most steps per table")
    ap.add_argument("-k", default="", help="pytest -k selection (e.g. merge_on_read)")
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    deadline = time.monotonic() + args.minutes * 60 if args.minutes else None
    total: Counter[str] = Counter()
    rounds = 0
    with tempfile.TemporaryDirectory(prefix="life-soak-") as tmp:
        figures = os.path.join(tmp, "figures.jsonl")
        env = {
            **os.environ,
            "PYTHONPATH": str(REPO_ROOT),
            "FLOWLEDGER_LIFE_EXAMPLES": str(args.examples),
            "FLOWLEDGER_LIFE_STEPS": str(args.table_steps),
            "FLOWLEDGER_LIFE_FIGURES": figures,
            "FLOWLEDGER_LIFE_SOAK": "1",  # no example database: the seed alone replays a round
        }
        while total["steps"] < args.steps and (deadline is None or time.monotonic() < deadline):
            cmd = [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-s",
                "-p",
                "no:randomly",
                "-p",
                "no:cacheprovider",
                "-m",
                args.tier,
                f"--hypothesis-seed={seed}",
                TEST,
                *(["-k", args.k] if args.k else []),
            ]
            print(
                f"soak round {rounds + 1}: seed {seed} ({total['steps']} steps so far)", flush=True
            )
            rc = subprocess.call(cmd, cwd=REPO_ROOT, env=env)
            rounds += 1
            total += _read(figures)
            if rc != 0:
                print(
                    f"soak FAILED in round {rounds}, seed {seed}: replay with\n  make soak "
                    f"SOAK_SEED={seed} SOAK_TIER={args.tier} SOAK_EXAMPLES={args.examples} "
                    f"SOAK_TABLE_STEPS={args.table_steps}"
                    + (f" SOAK_K={args.k}" if args.k else "")
                    + f"\n  (or: FLOWLEDGER_LIFE_SOAK=1 FLOWLEDGER_LIFE_EXAMPLES={args.examples}"
                    f" FLOWLEDGER_LIFE_STEPS={args.table_steps} pytest -m {args.tier}"
                    f" --hypothesis-seed={seed} {TEST})",
                    flush=True,
                )
                _summary(total, rounds)
                return rc
            seed += 1
    _summary(total, rounds)
    return 0


def _read(path: str) -> Counter[str]:
    out: Counter[str] = Counter()
    if not os.path.exists(path):
        return out
    with open(path, encoding="utf-8") as f:
        for line in f:
            for k, v in json.loads(line).items():
                if isinstance(v, int):
                    out[k] += v
    os.remove(path)
    return out


def _summary(total: Counter[str], rounds: int) -> None:
    print(f"soak: {rounds} rounds, " + json.dumps(dict(sorted(total.items()))), flush=True)


if __name__ == "__main__":
    sys.exit(main())
