"""What a Spark write committed, and the hooks that run after each such commit.

The seam between the two halves of the Spark integration: the writers (data source and native
writer) build a `CommitInfo` once their instant is completed and call every hook in order; the
provenance recorder is one such hook. A hook runs only after the instant completed, so a write
that failed or was rolled back never reaches a hook (it leaves no SEND event). The same
`SparkJobInfo` is stored as JSON in the commit metadata under `JOB_METADATA_KEY`, so a hook that
did not run (driver killed right after the commit) can be replayed later from the timeline alone.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from storage import ObjectStore
    from timeline import Entry

#: Commit-metadata key holding `SparkJobInfo.to_json()` for commits made by Spark writers.
JOB_METADATA_KEY = "flowledger.spark.job"

#: Commit-metadata key holding the id `flowledger.spark.save` gave a data-source write, so the
#: driver finds the commit that Spark's commit worker made.
WRITE_ID_METADATA_KEY = "flowledger.spark.write_id"

#: Spark conf key naming the flowledger repository (provenance) a session's writes report to.
REPO_CONF_KEY = "spark.flowledger.repo"


@dataclass(frozen=True)
class SparkJobInfo:
    """The Spark application and job that made a commit, and the files it read."""

    app_id: str
    app_name: str
    #: Spark job group / description when set, else the writer's name ("flowledger.write").
    job: str
    user: str = ""
    #: Input files of the written DataFrame (`df.inputFiles()`), as Spark names them.
    input_files: tuple[str, ...] = ()

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @staticmethod
    def from_json(text: str) -> SparkJobInfo:
        d: Mapping[str, Any] = json.loads(text)
        return SparkJobInfo(
            app_id=str(d["app_id"]),
            app_name=str(d["app_name"]),
            job=str(d["job"]),
            user=str(d.get("user", "")),
            input_files=tuple(str(p) for p in d.get("input_files", ())),
        )


@dataclass(frozen=True)
class OutputFile:
    """One data file the commit added, named as Spark would (`s3a://` or `file://`)."""

    uri: str
    rows: int
    size: int
    partition: str = ""


@dataclass(frozen=True)
class CommitInfo:
    """A completed Spark write on a flowledger table."""

    table_uri: str  # as the user named it (s3a://..., file://..., relative path)
    instant_time: str
    action: str  # commit | replacecommit
    operation: str  # insert | insert_overwrite | insert_overwrite_table
    files: tuple[OutputFile, ...]
    job: SparkJobInfo
    #: The flowledger repository provenance goes to (None: the writer found none configured).
    repo_uri: str | None = None
    #: Rows per output file summed; convenience for reports.
    extra: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)
    #: A keyed write (upsert, insert, delete): its files are file slices, each superseding
    #: one of its file group (provenance records them as slice_provenance.py does).
    keyed: bool = False
    #: The commit's timeline entry when the writer holds it (a keyed write commits on the
    #: driver): hooks take it instead of reading the timeline again.
    entry: Entry | None = field(default=None, compare=False, hash=False, repr=False)
    #: The table's store the writer holds (a keyed write): hooks read and name the table
    #: through it instead of opening a client of their own.
    store: ObjectStore | None = field(default=None, compare=False, hash=False, repr=False)

    @property
    def rows(self) -> int:
        return sum(f.rows for f in self.files)


CommitHook = Callable[[CommitInfo], None]

#: Attribute of a Spark session holding the hooks installed on it: they belong to the session
#: the caller installed them on and go with it (nothing process-wide outlives the session).
_SESSION_HOOKS = "_flowledger_commit_hooks"


def _installed(spark: Any) -> list[CommitHook]:
    hooks: list[CommitHook] | None = getattr(spark, _SESSION_HOOKS, None)
    if hooks is None:
        hooks = []
        setattr(spark, _SESSION_HOOKS, hooks)
    return hooks


def add_commit_hook(spark: Any, hook: CommitHook) -> None:
    """Run `hook` after every Spark write made through `spark` (idempotent per hook). The
    data source picks up hooks when it is registered: call `flowledger.spark.register(spark)`
    again after adding one."""
    hooks = _installed(spark)
    if hook not in hooks:
        hooks.append(hook)


def commit_hooks(spark: Any) -> tuple[CommitHook, ...]:
    """The hooks installed on `spark`, in the order they run."""
    return tuple(getattr(spark, _SESSION_HOOKS, None) or ())


def remove_commit_hook(spark: Any, hook: CommitHook) -> None:
    """Stop running `hook` after `spark`'s writes (no-op when it is not installed)."""
    hooks = _installed(spark)
    if hook in hooks:
        hooks.remove(hook)
