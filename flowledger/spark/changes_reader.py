"""Incremental and CDC reads of keyed tables through the data source:

    spark.read.format("flowledger").option("changesSince", I).load(uri)            # incremental
    spark.read.format("flowledger").option("changesSince", I).option("cdc", "true").load(uri)

The planning worker reads commit metadata only (`timeline.keyed.plan_changes`); the file
reads run in Spark's tasks: one partition per file of an incremental read, one per commit of
a CDC read (a record moved between partitions is one `u` row of its commit, so a commit's
slices are compared in one task). The rows equal `Table.changes` (docs/tables.md).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from storage import StoreSettings, open_store
from timeline import (
    ChangesPlan,
    KeyedProperties,
    Table,
    plan_changes,
    read_changed_file,
    read_commit_changes,
)

from .errors import SparkWriteError
from .keyed_options import option
from .paths import TablePath

#: Reader option -> Hudi's read option naming the same thing.
READ_NAMES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "changesSince": ("hoodie.datasource.read.begin.instanttime",),
        "changesUntil": ("hoodie.datasource.read.end.instanttime",),
        "cdc": ("hoodie.datasource.query.incremental.format",),
        "fullScan": ("hoodie.datasource.read.incr.fallback.fulltablescan.enable",),
    }
)
#: Begin values meaning "from the first commit" (Hudi's earliest instant is "000").
EARLIEST = ("", "0", "000", "earliest")


@dataclass(frozen=True)
class ChangesRequest:
    begin: str | None
    end: str | None
    cdc: bool
    full_scan: bool


def _get(options: Mapping[str, str], name: str) -> str | None:
    lowered = {str(k).lower(): str(v) for k, v in options.items()}
    for key in (name, *READ_NAMES[name]):
        if key.lower() in lowered:
            return lowered[key.lower()].strip()
    return None


def changes_request(options: Mapping[str, str]) -> ChangesRequest | None:
    """The incremental or CDC read the options ask for (None: a snapshot read)."""
    begin = _get(options, "changesSince")
    cdc = (_get(options, "cdc") or "").lower() in ("true", "cdc")
    if begin is None and not cdc:
        return None
    query_type = (option(options, "hoodie.datasource.query.type") or "").lower()
    if query_type == "snapshot":
        return None
    return ChangesRequest(
        None if (begin or "").lower() in EARLIEST else begin,
        _get(options, "changesUntil") or None,
        cdc,
        (_get(options, "fullScan") or "").lower() == "true",
    )


def _plan(table: Table, req: ChangesRequest) -> tuple[KeyedProperties, ChangesPlan]:
    props = table.properties
    if props is None:
        raise SparkWriteError(f"{table.uri} is not a keyed table: changes need record keys")
    plan = plan_changes(table, props, req.begin, req.end, cdc=req.cdc, full_scan=req.full_scan)
    return props, plan


def spark_schema(arrow: pa.Schema) -> StructType:
    from pyspark.sql.pandas.types import from_arrow_schema

    nullable = pa.schema([f.with_nullable(True) for f in arrow])
    return from_arrow_schema(nullable, prefer_timestamp_ntz=False)


def changes_schema(table: Table, req: ChangesRequest) -> StructType:
    return spark_schema(_plan(table, req)[1].output_schema)


def changes_reader(
    table: Table, path: TablePath, store: StoreSettings, req: ChangesRequest
) -> ChangesReader:
    props, plan = _plan(table, req)
    return ChangesReader(store, path, props, plan)


class ChangesReader(DataSourceReader):
    def __init__(
        self, store: StoreSettings, path: TablePath, props: KeyedProperties, plan: ChangesPlan
    ) -> None:
        self.store = store
        self.path = path
        self.props = props
        self.plan = plan

    def partitions(self) -> list[InputPartition]:
        units = self.plan.commits if self.plan.cdc else self.plan.files
        return [InputPartition(i) for i in range(len(units))]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        store = open_store(self.path.store_uri, self.store)
        i: Any = partition.value
        if self.plan.cdc:
            got = read_commit_changes(store, self.plan, self.props, self.plan.commits[i])
        else:
            got = read_changed_file(store, self.plan, self.plan.files[i])
        yield from got.to_batches()
