"""Writing data through the timeline: append (commit), insert_overwrite and delete_partition
(replacecommit). Files are named like Hudi's: `<fileId>_<instant>.parquet` with a fresh file
group per file, so concurrent appends never share a file group and never conflict."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from storage import UnknownOutcomeError

from .errors import TimelineError
from .file_stats import describe_bytes
from .instant import COMMIT, REPLACE_COMMIT, Instant
from .metadata import DataFile
from .parquet_io import local_parquet, to_parquet_bytes
from .partitioning import split_partitions
from .schema import merge_schemas
from .table_schema import latest_schema

if TYPE_CHECKING:
    from .txn import Transaction, WritableTable

MODES = ("append", "overwrite")


def _new_file_group() -> str:
    return f"{uuid.uuid4()}-0"


def put_table(txn: Transaction, partition: str, data: pa.Table) -> DataFile:
    """Write one pyarrow table as a Parquet data file of `txn` and return its record."""
    group = _new_file_group()
    key = txn.data_key(partition, f"{group}_{txn.instant_time}.parquet")
    body = to_parquet_bytes(data, txn.table.settings.parquet_compression_codec.arrow)
    txn.table.store.put(key, body)
    f = describe_bytes(key, body, partition, group)
    txn.add(f)
    return f


def write(
    table: WritableTable,
    data: pa.Table | Sequence[str | Path],
    mode: str = "append",
    partition_by: Sequence[str] | str | None = None,
    extra_metadata: Mapping[str, str] | None = None,
) -> Instant:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
    parts = [partition_by] if isinstance(partition_by, str) else list(partition_by or [])
    if not isinstance(data, pa.Table) and parts:
        raise ValueError("partition_by applies to a pyarrow table, not to ready Parquet files")
    if isinstance(data, pa.Table):
        incoming = data.schema
    else:
        incoming = None
        for path in data:
            schema = local_parquet(path).schema_arrow
            incoming = merge_schemas(incoming, schema, f"{table.uri} from {path}")
    naming = table.partition_naming() if parts else ""
    overwrite = mode == "overwrite"
    if overwrite:
        operation = "insert_overwrite" if parts else "insert_overwrite_table"
    else:
        operation = "insert"
    txn = table.begin(REPLACE_COMMIT if overwrite else COMMIT, operation=operation)
    try:
        # Checked on the view `begin` loaded (no extra LIST): the commit validates against
        # everything completed after it, schema changes included. A mismatch aborts `txn`.
        current = latest_schema(table, refresh=False)
        txn.schema = current if incoming is None else merge_schemas(current, incoming, table.uri)
        written: set[str] = set()
        if isinstance(data, pa.Table):
            for partition, piece in split_partitions(data, parts, naming=naming):
                put_table(txn, partition, piece)
                written.add(partition)
        else:
            for path in data:
                body = Path(path).read_bytes()
                group = _new_file_group()
                key = txn.data_key("", f"{group}_{txn.instant_time}.parquet")
                table.store.put(key, body)
                txn.add(describe_bytes(key, body, "", group))
                written.add("")
        if overwrite:
            current = {f.partition for f in table.snapshot().files}
            txn.replace_partitions(written if parts else current | written)
        return txn.commit(extra_metadata)
    except UnknownOutcomeError as exc:
        if txn.completing:
            raise  # the completion itself: it may have landed
        # A data file's write had an unknown outcome, but the instant never reached its log
        # write: it did not complete, whatever that file did. Known, so not "unknown".
        txn.abort()
        raise TimelineError(
            f"instant {txn.instant_time} on {table.uri} did not complete and was rolled back "
            f"(nothing was committed; writing again is safe): {exc}"
        ) from exc
    except BaseException:
        txn.abort()
        raise


def delete_partition(table: WritableTable, partitions: Sequence[str]) -> Instant:
    txn = table.begin(REPLACE_COMMIT, operation="delete_partition")
    try:
        txn.replace_partitions(partitions)
        return txn.commit()
    except BaseException:
        txn.abort()
        raise
