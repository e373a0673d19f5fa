"""What both Spark write paths share once files are written: the commit metadata they attach,
the `CommitInfo` they build and the post-commit hooks they run (see commit_info.py)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from timeline import COMMIT, REPLACE_COMMIT, DataFile, Entry, Instant

from .commit_info import CommitHook, CommitInfo, OutputFile, SparkJobInfo
from .paths import TablePath
from .plan_files import plan_files

log = logging.getLogger(__name__)

MODES = ("append", "overwrite")


def partition_columns(partition_by: Sequence[str] | str | None) -> list[str]:
    if partition_by is None:
        return []
    if isinstance(partition_by, str):
        return [c.strip() for c in partition_by.split(",") if c.strip()]
    return [str(c) for c in partition_by]


def plan_write(mode: str, parts: Sequence[str]) -> tuple[str, str]:
    """(action, operation) of a write: append is a commit, overwrite a replacecommit."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
    if mode == "append":
        return COMMIT, "insert"
    return REPLACE_COMMIT, "insert_overwrite" if parts else "insert_overwrite_table"


def job_info(spark: Any, df: Any = None, default_job: str = "flowledger.write") -> SparkJobInfo:
    """The application and job making this write (driver side), with the DataFrame's inputs."""
    sc = spark.sparkContext
    job = sc.getLocalProperty("spark.job.description") or sc.getLocalProperty("spark.jobGroup.id")
    inputs: tuple[str, ...] = ()
    if df is not None:
        try:
            inputs = plan_files(df)
        except Exception:
            inputs = ()
    return SparkJobInfo(
        app_id=str(sc.applicationId),
        app_name=str(sc.appName),
        job=str(job or default_job),
        user=str(sc.sparkUser()),
        input_files=inputs,
    )


def commit_info(
    path: TablePath,
    instant: Instant,
    operation: str,
    files: Iterable[DataFile],
    job: SparkJobInfo,
    repo_uri: str | None,
    *,
    keyed: bool = False,
) -> CommitInfo:
    return CommitInfo(
        table_uri=path.given,
        instant_time=instant.time,
        action=instant.action,
        operation=operation,
        files=tuple(
            OutputFile(path.spark_file(f.path), f.rows, f.size, f.partition) for f in files
        ),
        job=job,
        repo_uri=repo_uri,
        keyed=keyed,
    )


def entry_commit_info(path: TablePath, entry: Entry, repo_uri: str | None) -> CommitInfo:
    """The `CommitInfo` of a completed Spark write, rebuilt from its commit-log entry."""
    from .commit_info import JOB_METADATA_KEY

    return CommitInfo(
        table_uri=path.given,
        instant_time=entry.time,
        action=entry.action,
        operation=str(entry.metadata.get("operation", entry.action)),
        files=tuple(
            OutputFile(path.spark_file(f.path), f.rows, f.size, f.partition) for f in entry.added
        ),
        job=SparkJobInfo.from_json(entry.extra[JOB_METADATA_KEY]),
        repo_uri=repo_uri,
        keyed="keyed" in entry.metadata,
    )


def run_hooks(info: CommitInfo, hooks: Iterable[CommitHook]) -> None:
    """Call each hook; the commit stands whatever a hook does (a failure is a warning)."""
    for hook in hooks:
        try:
            hook(info)
        except Exception as exc:
            name = getattr(hook, "__qualname__", repr(hook))
            log.warning(
                "flowledger: commit hook %s failed after instant %s of %s completed: %s",
                name, info.instant_time, info.table_uri, exc,
            )  # fmt: skip


def extra_metadata(job: SparkJobInfo, more: Mapping[str, str] | None = None) -> dict[str, str]:
    from .commit_info import JOB_METADATA_KEY

    return {JOB_METADATA_KEY: job.to_json(), **(more or {})}


Finisher = Callable[[CommitInfo], None]
