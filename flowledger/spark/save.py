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
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from storage import open_store
from timeline import Table

from .commit_info import WRITE_ID_METADATA_KEY, CommitInfo
from .committing import MODES, entry_commit_info, partition_columns
from .conf import store_settings, table_settings, write_conf
from .errors import SparkWriteError
from .keyed_options import keyed_options, requested_properties
from .paths import resolve_repo_uri, table_path
from .plan_files import plan_files

#: How many of the newest writes `save` looks through for its own commit (concurrent writers
#: may complete after it; more than this many between its commit and the lookup is unlikely).
LOOKBACK = 100


def plan_inputs(df: Any) -> tuple[str, ...]:
    """The files `df` reads, as Spark names them, those behind a cached DataFrame included
    (plan_files.py; empty for in-memory data, `spark.range`)."""
    return plan_files(df)


def save(
    df: Any,
    uri: str,
    mode: str = "append",
    partition_by: Sequence[str] | str | None = None,
    *,
    repo: str | None = None,
    options: Mapping[str, str] | None = None,
) -> CommitInfo:
    """Write `df` to the flowledger table at `uri` through the "flowledger" data source as one
    commit (append) or replacecommit (overwrite: of the partitions written, or of the whole
    table when unpartitioned), recording the job's input files; returns what it committed.

    `repo`: the provenance repository (default the session's `spark.flowledger.repo`);
    `options`: further writer options (e.g. `hoodie.*` table settings; a keyed write's
    `operation`, `recordKey`, ...: docs/spark.md, "Keyed tables"). An `inputFiles` option
    given here wins over the plan's. The commit hooks run in Spark's commit worker, as for
    every data-source write."""
    if mode not in MODES:
        raise SparkWriteError(f"mode must be one of {MODES}, not {mode!r}")
    from .datasource import ensure_registered
    from .writer_options import INPUT_FILES_OPTION, NAME, WRITE_ID_OPTION

    spark = df.sparkSession
    ensure_registered(spark)
    write_id = uuid.uuid4().hex
    opts: dict[str, str] = {
        INPUT_FILES_OPTION: json.dumps(list(plan_inputs(df))),
        WRITE_ID_OPTION: write_id,
    }
    parts = partition_columns(partition_by)
    if parts:
        opts["partitionBy"] = ",".join(parts)
    if repo:
        opts["repo"] = repo
    opts.update({str(k): str(v) for k, v in (options or {}).items()})
    if keyed_options(opts) is not None or requested_properties(opts) is not None:
        from .keyed_writers import save_keyed

        return save_keyed(df, uri, mode, opts, write_id)  # committed on this driver
    df.write.format(NAME).mode(mode).options(**opts).save(uri)
    return committed(spark, uri, write_id, repo)


def committed(spark: Any, uri: str, write_id: str, repo: str | None) -> CommitInfo:
    """The commit a data-source write with `write_id` made (Spark's commit worker made it:
    the driver finds it in the newest completed writes, one GET per entry read); `repo`: the
    provenance repository asked for (else the session's)."""
    conf = write_conf(spark)
    repo_uri = resolve_repo_uri(repo, conf)
    path = table_path(uri)
    table = Table.open(open_store(path.store_uri, store_settings(conf)), table_settings(conf))
    newest = table.timeline().completed().write_timeline().by_completion()[-LOOKBACK:]
    for instant in reversed(newest):
        entry = table.entry(instant.time)
        if entry.extra.get(WRITE_ID_METADATA_KEY) == write_id:
            return entry_commit_info(path, entry, repo_uri)
    raise SparkWriteError(
        f"the write to {uri} returned, but none of its {LOOKBACK} newest commits is it "
        f"(write id {write_id})"
    )
