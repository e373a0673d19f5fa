"""Run every benchmark: `python -m bench [--quick] [name ...]`."""

from __future__ import annotations

import importlib
import sys

ALL = ["objectstore", "timeline", "archival", "content", "provenance", "service", "pipeline"]


def main() -> None:
    args = sys.argv[1:]
    quick = ["--quick"] if "--quick" in args else []
    names = [a for a in args if not a.startswith("-")] or ALL
    for name in names:
        try:
            module = importlib.import_module(f"bench.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"bench.{name}":
                print(f"bench {name}: not built yet")
                continue
            raise
        print(f"\n=== bench {name}")
        module.main(quick)


if __name__ == "__main__":
    main()
