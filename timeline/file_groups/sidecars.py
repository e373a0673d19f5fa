"""Sidecars: objects beside a base file or log object holding what did not fit in its
commit's metadata (a large bloom filter of its keys). A commit's write stats (`WRITE_STATS`,
one record per file written) name them; the cleaner deletes a sidecar with its file."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

WRITE_STATS = "write_stats"  # the commit-metadata field: one record per file written


def sidecars(stats: Sequence[Mapping[str, Any]], paths: set[str]) -> list[str]:
    """The sidecar objects of the data files `paths` (for the cleaner)."""
    return [str(s["bloom_path"]) for s in stats if s.get("bloom_path") and s["path"] in paths]
