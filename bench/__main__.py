"""Run benchmarks: `python -m bench [--quick] [name ...]` or `python -m bench NAME [options]`.

Names come first; everything from the first option on is passed to each named benchmark's
`main(argv)`, so `python -m bench content_download --size-mib 64` reaches the benchmark intact.
"""

from __future__ import annotations

import importlib
import inspect
import sys

ALL = [
    "objectstore",
    "timeline",
    "archival",
    "content",
    "provenance",
    "service",
    "pipeline",
    "keyed_index",
    "s3_read_clients",
]


def split_args(args: list[str]) -> tuple[list[str], list[str]]:
    """(benchmark names, options for them): names are the leading non-option arguments."""
    first_option = next((i for i, a in enumerate(args) if a.startswith("-")), len(args))
    return args[:first_option] or ALL, args[first_option:]


def main() -> None:
    names, options = split_args(sys.argv[1:])
    for name in names:
        try:
            module = importlib.import_module(f"bench.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"bench.{name}":
                print(f"bench {name}: not built yet")
                continue
            raise
        print(f"\n=== bench {name}")
        if inspect.signature(module.main).parameters:
            module.main(options)
        elif options:
            sys.exit(f"bench {name} takes no options (got {' '.join(options)})")
        else:
            module.main()


if __name__ == "__main__":
    main()
