"""The files a DataFrame reads, cached ones included.

`df.inputFiles()` walks the optimized logical plan for file relations. Once a DataFrame is
cached (`df.cache()`, `persist`), that plan holds an `InMemoryRelation` in place of the
scan, so Spark answers nothing for it, although the rows came from files. The relation
still carries the physical plan that filled the cache (`cacheBuilder().cachedPlan()`),
whose `FileSourceScanExec` nodes name their relation's files: those are added. Walking the
plan needs the JVM objects of classic PySpark (py4j); on Spark Connect, or on a plan
this walk does not know, the answer is `df.inputFiles()` alone.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)

_SCAN = "FileSourceScanExec"
_CACHE_SCAN = "InMemoryTableScanExec"
_ADAPTIVE = "AdaptiveSparkPlanExec"
_CACHED = "InMemoryRelation"


def plan_files(df: Any) -> tuple[str, ...]:
    """`df.inputFiles()`, then the files behind the cached relations of its plan, each
    once, in that order."""
    files = [str(f) for f in df.inputFiles()]
    jdf = getattr(df, "_jdf", None)  # classic PySpark only
    if jdf is not None:
        try:
            for leaf in _leaves(jdf.queryExecution().optimizedPlan()):
                if _name(leaf) == _CACHED:
                    files.extend(_scanned(leaf.cacheBuilder().cachedPlan()))
        except Exception as exc:  # a plan of a Spark this walk does not know
            log.info("flowledger: the cached inputs of a DataFrame are unknown: %s", exc)
    return tuple(dict.fromkeys(files))


def _scanned(plan: Any) -> list[str]:
    """The files the file scans of a physical plan read (through nested caches and
    adaptive plans)."""
    out: list[str] = []
    for node in _leaves(plan):
        name = _name(node)
        if name == _SCAN:
            out.extend(str(f) for f in node.relation().inputFiles())
        elif name == _ADAPTIVE:  # a leaf in the tree: the plan it adapts is a field
            out.extend(_scanned(node.inputPlan()))
        elif name == _CACHE_SCAN:  # a cache of a cached DataFrame
            out.extend(_scanned(node.relation().cacheBuilder().cachedPlan()))
    return out


def _leaves(plan: Any) -> list[Any]:
    leaves = plan.collectLeaves()
    return [leaves.apply(i) for i in range(leaves.size())]


def _name(node: Any) -> str:
    return str(node.getClass().getSimpleName())


__all__ = ["plan_files"]
