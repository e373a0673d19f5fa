"""What one keyed write is asked to do, and the write once it is planned.

`KeyedWriteRequest` is the one value every keyed write (upsert, insert, delete by keys or by
filter) is stated in, whatever the table type; `PreparedWrite` is that request after
`begin`: the instant's transaction, the planner over the state read after it, the prepared
batches and the schema the write writes in. The copy-on-write writer (copy_on_write.py) and
the delta writer (merge_on_read.py) each take a `PreparedWrite`; keyed/write/client.py
plans it and dispatches on the table type.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow as pa

from ...choice import Choice
from ..policies import OnDuplicate, TableType
from ..properties import KeyedProperties
from .planner import Batch, Planner
from .planning import Filter

if TYPE_CHECKING:
    from ...txn import Transaction
    from ..index import IndexFactory


class WriteOperation(Choice):
    """What a keyed write does (Hudi's `hoodie.datasource.write.operation` values it
    offers). The CLI's `--operation` and Spark's `operation` option take these names."""

    UPSERT = "upsert"
    INSERT = "insert"
    DELETE = "delete"

    @classmethod
    def describe(cls) -> str:
        return "a keyed write's operation"


@dataclass(frozen=True, eq=False)
class KeyedWriteRequest:
    """One keyed write: `data` to upsert or insert, or `deletes` (keys, optionally the
    ordering field) / `where` (a filter) to delete. The table's `props` say the record key,
    ordering field, partitioning, merge mode and table type.

    `on_duplicate`: what an insert does with a key already stored (`fail`: nothing is
    committed; `drop`: skipped). `index` replaces the index the settings choose; `on_plan`
    runs between planning and writing (tests interleave writers with it)."""

    props: KeyedProperties
    operation: WriteOperation
    data: pa.Table | None = None
    deletes: pa.Table | None = None
    where: Filter | None = None
    on_duplicate: OnDuplicate = OnDuplicate.FAIL
    metadata: Mapping[str, str] = field(default_factory=dict)
    index: IndexFactory | None = None
    on_plan: Callable[[Planner], None] | None = None

    def __post_init__(self) -> None:
        # A plain string names an operation too (the enum's values); held as the enum.
        object.__setattr__(self, "operation", WriteOperation.parse(self.operation))
        object.__setattr__(self, "on_duplicate", OnDuplicate.parse(self.on_duplicate))
        if self.operation == WriteOperation.DELETE:
            if self.data is not None or (self.deletes is None) == (self.where is None):
                raise ValueError("a delete takes keys or a filter (where=), exactly one of them")
        elif self.data is None or self.deletes is not None or self.where is not None:
            raise ValueError(f"an {self.operation} takes data, and no keys or filter to delete")

    @property
    def merge_on_read(self) -> bool:
        """Whether the write is a delta commit (log blocks) rather than new base files."""
        return self.props.table_type == TableType.MERGE_ON_READ


@dataclass(frozen=True, eq=False)
class PreparedWrite:
    """A request planned after `begin`: `batch` (upserts or inserts) and `dbatch` (deletes
    by key) prepared by the merge mode, `schema` the one the write's files are written in."""

    request: KeyedWriteRequest
    txn: Transaction
    plan: Planner
    batch: Batch | None
    dbatch: Batch | None
    schema: pa.Schema
