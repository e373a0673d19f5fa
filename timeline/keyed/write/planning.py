"""Planning steps every keyed write shares: the state it plans on, and filter deletes."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

import pyarrow as pa
import pyarrow.compute as pc

from ... import predicate
from ...errors import CommitConflict
from ...instant import ROLLBACK
from ...snapshot import TableState

if TYPE_CHECKING:
    from ...txn import Transaction

#: A filter for `delete`: a pyarrow compute expression or a SQL predicate (DuckDB; text, or
#: parsed once for the many files a delete reads).
Filter: TypeAlias = pc.Expression | str | predicate.Predicate


def filter_matches(data: pa.Table, where: Filter) -> list[int]:
    """Row positions of `data` the filter selects (a SQL predicate: one expression, evaluated
    in the SQL sandbox; see timeline/predicate.py)."""
    if isinstance(where, str | predicate.Predicate):
        return predicate.matches(data, where)
    pos = pa.array(range(data.num_rows), pa.int64())
    marked = data.append_column(predicate.POSITION, pos)
    return [int(v) for v in marked.filter(where).column(predicate.POSITION).to_pylist()]


def plan_on(txn: Transaction, st: TableState) -> None:
    """Validate the commit only against completions this plan did not see (the state read
    after `begin` may be newer than the transaction's base); a rollback fencing this very
    instant off must still stop it."""
    for e in st.entries:
        if (
            e.seq > txn.base
            and e.action == ROLLBACK
            and e.metadata.get("target_state") == "pending"
            and e.target == txn.instant_time
        ):
            raise CommitConflict(
                f"instant {txn.instant_time} was rolled back by {e.time}", e.time, e.action
            )
    txn.base = max([txn.base, *(e.seq for e in st.entries)])
