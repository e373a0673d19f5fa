"""Run the flowledger CLI and count the S3 API calls it makes (a fresh process, as a user runs
it): `python -m tests.support.count_requests OUT.json <flowledger args...>` writes
`{operation: count}` to OUT.json when the command ends."""

from __future__ import annotations

import atexit
import json
import sys
import threading
from collections import Counter
from typing import Any

import botocore.client

_counts: Counter[str] = Counter()
_lock = threading.Lock()
_call = botocore.client.BaseClient._make_api_call


def _counted(self: Any, operation: str, params: Any) -> Any:
    with _lock:
        _counts[operation] += 1
    return _call(self, operation, params)


def main() -> None:
    out, args = sys.argv[1], sys.argv[2:]
    botocore.client.BaseClient._make_api_call = _counted  # type: ignore[method-assign]
    atexit.register(lambda: open(out, "w").write(json.dumps(dict(_counts))))  # noqa: SIM115
    from flowledger.cli import app

    app(args, prog_name="flowledger")


if __name__ == "__main__":
    main()
