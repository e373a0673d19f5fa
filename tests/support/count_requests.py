"""Run the flowledger CLI and count the S3 API calls it makes (a fresh process, as a user runs
it): `python -m tests.support.count_requests OUT.json <flowledger args...>` writes
`{operation: count}` to OUT.json when the command ends. Counts botocore's calls and the reads
and plain PUTs sent through obstore (storage/s3_reads.py, storage/s3_puts.py), under
botocore's operation names."""

from __future__ import annotations

import atexit
import json
import sys
import threading
from collections import Counter
from typing import Any

import botocore.client

from storage.s3_puts import ObjectPuts
from storage.s3_reads import ObjectReads

_counts: Counter[str] = Counter()
_lock = threading.Lock()
_call = botocore.client.BaseClient._make_api_call
_fast_get, _fast_head, _fast_put = ObjectReads.get, ObjectReads.head, ObjectPuts.put


def _count(operation: str) -> None:
    with _lock:
        _counts[operation] += 1


def _counted(self: Any, operation: str, params: Any) -> Any:
    _count(operation)
    return _call(self, operation, params)


def _fast_get_counted(self: ObjectReads, *args: Any) -> Any:
    _count("GetObject")
    return _fast_get(self, *args)


def _fast_head_counted(self: ObjectReads, *args: Any) -> Any:
    _count("HeadObject")
    return _fast_head(self, *args)


def _fast_put_counted(self: ObjectPuts, *args: Any) -> Any:
    _count("PutObject")
    return _fast_put(self, *args)


def main() -> None:
    out, args = sys.argv[1], sys.argv[2:]
    botocore.client.BaseClient._make_api_call = _counted  # type: ignore[method-assign]
    ObjectReads.get = _fast_get_counted  # type: ignore[method-assign,assignment]
    ObjectReads.head = _fast_head_counted  # type: ignore[method-assign,assignment]
    ObjectPuts.put = _fast_put_counted  # type: ignore[method-assign,assignment]
    atexit.register(lambda: open(out, "w").write(json.dumps(dict(_counts))))  # noqa: SIM115
    from flowledger.cli import app

    app(args, prog_name="flowledger")


if __name__ == "__main__":
    main()
