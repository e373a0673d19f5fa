"""The data source's writer options and its tasks' commit message (shared by the plain and
the keyed data-source writers)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql.datasource import WriterCommitMessage

from timeline import DataFile

from .commit_info import WRITE_ID_METADATA_KEY, SparkJobInfo
from .committing import extra_metadata

NAME = "flowledger"


def get_option(options: Mapping[str, str], name: str) -> str | None:
    for key in (name, name.lower()):
        if key in options:
            return str(options[key])
    return None


#: Writer option naming the files the job read: a JSON array (what `flowledger.spark.save`
#: passes) or a comma-separated list.
INPUT_FILES_OPTION = "inputFiles"


#: Writer option: an id recorded in the commit metadata (`flowledger.spark.save` sets it).
WRITE_ID_OPTION = "flowledgerWriteId"

BARE_KEYED = (
    "a keyed write (upsert, insert, delete) needs Spark to bring each file group's records "
    "together, which a Python data source cannot ask for: write with "
    "flowledger.spark.save(df, uri, options={'operation': 'upsert', 'recordKey': ...}) "
    "(the data source, planned by the driver) or flowledger.spark.write(df, uri, options=...)"
)


def input_files_option(options: Mapping[str, str]) -> tuple[str, ...]:
    """The `inputFiles` writer option: the files the job read."""
    raw = (get_option(options, INPUT_FILES_OPTION) or "").strip()
    if raw.startswith("["):
        return tuple(str(p) for p in json.loads(raw))
    return tuple(p.strip() for p in raw.split(",") if p.strip())


@dataclass
class FilesWritten(WriterCommitMessage):
    """A task's add actions: the data files it wrote (picklable `DataFile`s)."""

    files: list[DataFile] = field(default_factory=list)
    job: str = ""
    #: Write stats of the files (keyed writes: one per rewritten file group).
    stats: list[dict[str, Any]] = field(default_factory=list)
    beat: bool = False


@dataclass(frozen=True)
class Gathered:
    """What a data-source writer's commit worker commits: its tasks' messages, the Spark job
    they ran in and the commit metadata naming it (and the write id `save` passed)."""

    messages: list[FilesWritten]
    job: SparkJobInfo
    metadata: dict[str, str]

    @property
    def files(self) -> list[DataFile]:
        return [f for m in self.messages for f in m.files]

    @property
    def beat(self) -> bool:
        """Whether a task wrote the heartbeat object (the commit then deletes it)."""
        return any(m.beat for m in self.messages)


def gather(
    facts: Any, options: Mapping[str, str], messages: Sequence[WriterCommitMessage | None]
) -> Gathered:
    """The commit worker's view of a write (both data-source writers): `facts` is the
    driver's `datasource.DriverFacts`."""
    written = [m for m in messages if isinstance(m, FilesWritten)]
    job = SparkJobInfo(
        app_id=facts.app_id,
        app_name=facts.app_name,
        job=next((m.job for m in written if m.job), "") or "flowledger.datasource",
        user=facts.user,
        # A data source sees no plan: the inputs come from the `inputFiles` option, which
        # `flowledger.spark.save` fills from the DataFrame's plan.
        input_files=input_files_option(options),
    )
    write_id = get_option(options, WRITE_ID_OPTION)
    more = {WRITE_ID_METADATA_KEY: write_id} if write_id else None
    return Gathered(written, job, extra_metadata(job, more))
