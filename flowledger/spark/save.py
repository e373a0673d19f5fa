"""`flowledger.spark.save`: a data-source write that records the job's inputs.

PySpark's Python Data Source API hands the writer Arrow batches, never the query plan, so a
plain `df.write.format("flowledger").save(uri)` cannot know which files the job read. `save`
asks the DataFrame on the driver (`df.inputFiles()`: a walk of the plan, no Spark job, no data
read) and passes them to the data source as the `inputFiles` option, which the commit records
in the commit metadata and in provenance (RECEIVE per input file). It works the same on classic
PySpark and Spark Connect, and patches nothing: jobs that write through
`df.write.format("flowledger")` directly record their inputs with the OpenLineage listener
instead (docs/spark.md, "Provenance").
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from .committing import MODES, partition_columns
from .errors import SparkWriteError


def plan_inputs(df: Any) -> tuple[str, ...]:
    """The files `df` reads, as Spark names them (empty for in-memory data, `spark.range`)."""
    return tuple(str(p) for p in df.inputFiles())


def save(
    df: Any,
    uri: str,
    mode: str = "append",
    partition_by: Sequence[str] | str | None = None,
    *,
    repo: str | None = None,
    options: Mapping[str, str] | None = None,
) -> None:
    """Write `df` to the flowledger table at `uri` through the "flowledger" data source as one
    commit (append) or replacecommit (overwrite: of the partitions written, or of the whole
    table when unpartitioned), recording the job's input files.

    `repo`: the provenance repository (default the session's `spark.flowledger.repo`);
    `options`: further writer options (e.g. `hoodie.*` table settings). An `inputFiles` option
    given here wins over the plan's."""
    if mode not in MODES:
        raise SparkWriteError(f"mode must be one of {MODES}, not {mode!r}")
    from .datasource import INPUT_FILES_OPTION, NAME, ensure_registered

    ensure_registered(df.sparkSession)
    opts: dict[str, str] = {INPUT_FILES_OPTION: json.dumps(list(plan_inputs(df)))}
    parts = partition_columns(partition_by)
    if parts:
        opts["partitionBy"] = ",".join(parts)
    if repo:
        opts["repo"] = repo
    opts.update({str(k): str(v) for k, v in (options or {}).items()})
    df.write.format(NAME).mode(mode).options(**opts).save(uri)
