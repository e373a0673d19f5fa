"""The record-level index of a keyed table against a full rebuild from its files: what the
index (base shards, then deltas) names for the file groups it tracks must be what an
`indexing` run from the files names."""

from __future__ import annotations

import pyarrow as pa

from timeline import Table
from timeline.keyed import build_index, index_view
from timeline.keyed.index.record_index import INDEX_SCHEMA, apply_delta, read_shard

Named = set[tuple[str, str, str]]


def folded_index(t: Table) -> tuple[Named, frozenset[str]]:
    """(key, partition, file group) rows of the index as of the table's latest state, for
    groups still live; and the groups it does not track (found by ranges and blooms)."""
    st = t.state()
    view = index_view(st)
    assert view is not None, "the record-level index is missing or stale"
    parts = [read_shard(t.store, s)[0] for s in view.shards]
    mapping = pa.concat_tables(parts) if parts else INDEX_SCHEMA.empty_table()
    props = t.properties
    assert props is not None
    for d in view.deltas:
        mapping = apply_delta(mapping, read_shard(t.store, d)[0], props)
    live = set(st.latest_slices()) if st.is_merge_on_read() else set()
    if not st.is_merge_on_read():
        live = {f.group for f in st.snapshot().files}
    rows = zip(*(mapping.column(c).to_pylist() for c in INDEX_SCHEMA.names), strict=True)
    return {(k, p, g) for k, p, g in rows if g in live}, view.untracked


def assert_index_matches_rebuild(t: Table) -> frozenset[str]:
    """The index as the writes left it names each key of the groups it tracks as a rebuild
    from the files does (which then tracks every group); returns the untracked groups."""
    kept, untracked = folded_index(t)
    build_index(t, from_files=True)
    rebuilt, none = folded_index(t)
    assert none == frozenset()
    assert {r for r in kept if r[2] not in untracked} == {
        r for r in rebuilt if r[2] not in untracked
    }
    return untracked
