"""A delete by keys keeps the rewritten file's bloom filter: the kept keys are a subset of the
old file's, so its filter still holds every one of them and nothing is hashed again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from storage import StoreSettings, open_store
from timeline import Table, TableSettings
from timeline.file_groups.sidecars import WRITE_STATS
from timeline.keyed import KeyedProperties
from timeline.keyed.index import ranges as index_mod
from timeline.keyed.index.bloom import BloomFilter

pytestmark = pytest.mark.unit

PROPS = KeyedProperties.of("id", ordering_field="ts")


def _rows(ids: list[int], ts: int = 1) -> pa.Table:
    return pa.table({"id": ids, "ts": [ts] * len(ids), "v": [f"v{i}" for i in ids]})


def _last_stats(t: Table) -> list[dict[str, Any]]:
    return list(t.state().ordered_writes()[-1].metadata[WRITE_STATS])


@pytest.mark.parametrize("inline", [True, False])
def test_a_delete_keeps_the_old_filter_and_every_kept_key_is_still_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, inline: bool
) -> None:
    if not inline:  # every filter in a sidecar object
        monkeypatch.setattr(index_mod, "INLINE_MAX_BYTES", 0)
    store = open_store("file://" + str(tmp_path / "t"), StoreSettings(fsync=False))
    t = Table.create(store, PROPS, TableSettings(small_file_limit=0, local_entry_cache=False))
    t.insert(_rows(list(range(0, 400))))
    (before,) = _last_stats(t)

    built: list[int] = []
    build = BloomFilter.build

    def counted(keys: Any, fpp: float = 0.01) -> BloomFilter:
        built.append(len(keys))
        return build(keys, fpp)

    monkeypatch.setattr(BloomFilter, "build", staticmethod(counted))
    t.delete(pa.table({"id": [3, 150, 399], "ts": [2, 2, 2]}))
    assert built == []  # the delete hashed no key
    (after,) = _last_stats(t)
    assert after["rows"] == 397 and after["deletes"] == 3
    for field in ("bloom", "bloom_num_bits", "bloom_num_hashes", "bloom_hash"):
        assert after.get(field) == before.get(field)
    if inline:
        assert after["bloom"] and not after.get("bloom_path")
    else:  # its own sidecar object (the old one goes with the old slice)
        assert after["bloom_path"] and after["bloom_path"] != before["bloom_path"]

    # The kept keys are found (updated in place, not inserted twice); deleted ones come back.
    t.upsert(_rows([4, 150], ts=3))
    got = {r["id"]: r["ts"] for r in t.read().to_pylist()}
    assert len(got) == 398 and got[4] == 3 and got[150] == 3 and 3 not in got
