"""The one entry point of keyed writes (Hudi's write client): a `KeyedWriteRequest` becomes
one instant of the table type's action, a `commit` of new file slices on a copy-on-write
table (copy_on_write.py) or a `deltacommit` of log blocks on a merge-on-read table
(merge_on_read.py).

Both plan alike, after `begin` (so every completion the state read misses is validated at
commit): the planner over that state, the batch prepared by the merge mode, the schema the
write writes in. The writers then locate, decide, place and write; the commit records what
they wrote.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...instant import COMMIT, DELTA_COMMIT, Instant
from ...schema import merge_schemas
from ..index import RECORD_INDEX_DELTA, merge_if_due
from .copy_on_write import rewrite_details
from .merge_on_read import delta_details
from .planner import Planner, prepare_batch
from .planning import plan_on
from .request import KeyedWriteRequest, PreparedWrite

if TYPE_CHECKING:
    from ...txn import Transaction
    from ..context import KeyedTable


def _prepare(table: KeyedTable, txn: Transaction, req: KeyedWriteRequest) -> PreparedWrite:
    st = table.state()  # read after begin: whatever it misses is validated at commit
    plan_on(txn, st)
    mor = req.merge_on_read
    plan = Planner(table, req.props, st, req.index, merge_on_read=mor)
    t, props = txn.instant_time, req.props
    batch = prepare_batch(req.data, props, t, upsert=True) if req.data is not None else None
    dbatch = None
    if req.deletes is not None:
        dbatch = prepare_batch(req.deletes, props, t, upsert=False)
    schema = plan.schema
    if batch is not None:
        schema = merge_schemas(plan.schema, batch.rows.schema, table.uri)
    if schema is None:
        raise ValueError(f"{table.uri}: a keyed table states its meta columns at creation")
    txn.schema = schema
    return PreparedWrite(req, txn, plan, batch, dbatch, schema)


def write_keyed(table: KeyedTable, req: KeyedWriteRequest) -> Instant:
    """One keyed commit as `req` asks, of the action the table type writes."""
    txn = table.begin(DELTA_COMMIT if req.merge_on_read else COMMIT, operation=req.operation.value)
    try:
        w = _prepare(table, txn, req)
        details = delta_details(w) if req.merge_on_read else rewrite_details(w)
        done = txn.commit(dict(req.metadata), details)
    except BaseException:
        txn.abort()
        raise
    index = w.plan.record_index
    if index is not None and RECORD_INDEX_DELTA in details:
        # counted as of the plan: a concurrent commit may add one
        merge_if_due(table, len(index.deltas) + (1 if details[RECORD_INDEX_DELTA]["rows"] else 0))
    return done
