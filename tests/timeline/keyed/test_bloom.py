"""The per-file bloom filter: no false negatives, one hash whatever form the keys come in, and
filters written with the earlier per-key blake2b hash still probed correctly."""

from __future__ import annotations

import math
import tracemalloc
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from storage import open_store
from timeline import Table, TableSettings
from timeline.keyed import KeyedProperties
from timeline.keyed.index import bloom
from timeline.keyed.index.bloom import (
    BLOCKED_WORDS,
    HASH_BLAKE2B,
    HASH_WORDS,
    BloomBuilder,
    BloomFilter,
    key_hashes,
)

pytestmark = pytest.mark.unit

KEYS = ["", "a", "a\0", "é", "12345678", "123456789", "x" * 100, "ключ/🙂", *map(str, range(5000))]


@pytest.mark.parametrize(("fpp", "layout"), [(0.01, BLOCKED_WORDS), (1e-6, HASH_WORDS)])
def test_every_key_added_is_found(fpp: float, layout: str) -> None:
    bf = BloomFilter.build(KEYS, fpp)
    assert bf.hash_name == layout
    assert bf.might_contain(KEYS).all()
    assert bf.might_contain(pa.array(KEYS)).all()


@pytest.mark.parametrize("fpp", [0.05, 0.01, 0.001])
def test_false_positive_rate_is_near_the_target(fpp: float) -> None:
    keys = pa.array([f"k{i}" for i in range(20_000)])
    bf = BloomFilter.build(keys, fpp)
    absent = bf.might_contain(pa.array([f"other{i}" for i in range(200_000)]))
    assert absent.mean() < 1.3 * fpp, (bf.hash_name, absent.mean())


def test_the_blocked_layout_is_built_where_it_costs_little() -> None:
    """Blocked filters at copy-on-write's rate (a quarter more bits than a plain one),
    plain ones at merge-on-read's 1e-6, where blocks would take 3.5x the bits."""
    assert bloom.blocked_size(0.01) == (12.0, 6)
    assert bloom.blocked_size(1e-6) is None
    blocked = BloomBuilder(100_000, 0.01)
    plain = BloomBuilder(100_000, 1e-6)
    assert (blocked.hash_name, blocked.num_bits) == (BLOCKED_WORDS, 1_200_000)
    assert plain.hash_name == HASH_WORDS
    asked = BloomBuilder(100_000, 0.01, plain=True)
    assert (asked.hash_name, asked.num_bits, asked.num_hashes) == (HASH_WORDS, 958_506, 7)


def _blocked_rate(per_key: float, k: int) -> float:
    """A blocked filter's false-positive rate: an absent key probes a word holding a Poisson
    number of keys (64 / `per_key` on average), each of which set `k` of its 64 bits."""
    mean = 64 / per_key
    p, rate = math.exp(-mean), 0.0
    for held in range(int(10 * mean) + 50):
        rate += p * (1 - (63 / 64) ** (k * held)) ** k
        p *= mean / (held + 1)
    return rate


def test_the_blocked_rates_are_the_model_s() -> None:
    for per_key, k, rate in bloom.BLOCKED_RATES:
        best = min(range(1, bloom.BLOCKED_MAX_HASHES + 1), key=lambda j: _blocked_rate(per_key, j))
        assert k == best
        assert _blocked_rate(per_key, k) == pytest.approx(rate, rel=1e-3)


def test_a_blocked_builder_holds_its_filter_packed() -> None:
    """A rewrite of a 2.5M-key file held a byte per bit of its filter (24 MiB at 0.01);
    a blocked builder holds a bit per bit."""
    tracemalloc.start()
    try:
        builder = BloomBuilder(2_500_000, 0.01)
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert builder.num_bits == 30_000_000
    assert held <= 30_000_000 // 8 + 4096, held


def test_lists_arrays_slices_and_chunks_hash_alike() -> None:
    arr = pa.array(KEYS)
    whole = key_hashes(KEYS)
    for form in (arr, pa.chunked_array([arr[:7], arr[7:]]), arr.cast(pa.large_string())):
        got = key_hashes(form)
        assert np.array_equal(got[0], whole[0]) and np.array_equal(got[1], whole[1])
    tail = key_hashes(arr.slice(3))
    assert np.array_equal(tail[0], whole[0][3:])


def test_small_chunks_give_the_same_hashes(monkeypatch: pytest.MonkeyPatch) -> None:
    whole = key_hashes(KEYS)
    monkeypatch.setattr(bloom, "_CHUNK_CELLS", 64)  # many chunks, one key wider than a chunk
    got = key_hashes(KEYS)
    assert np.array_equal(got[0], whole[0]) and np.array_equal(got[1], whole[1])
    assert BloomFilter.build(KEYS).might_contain(KEYS).all()


def test_keys_that_differ_only_by_padding_hash_apart() -> None:
    h1, _ = key_hashes(["a", "a\0", "a\0\0", ""])
    assert len(set(h1.tolist())) == 4


def test_a_filter_stored_before_the_vectorized_hash_is_probed_with_its_own() -> None:
    keys = [f"id{i}" for i in range(300)]
    m, k = 4096, 5
    h1, h2 = key_hashes(keys, HASH_BLAKE2B)
    bits = np.zeros(m, dtype=bool)
    bits[bloom._hashed_positions(h1, h2, m, k, HASH_BLAKE2B).ravel()] = True
    legacy = BloomFilter(np.packbits(bits, bitorder="little").tobytes(), m, k).to_json()
    legacy.pop("hash")  # what such a filter's JSON holds: no hash name
    bf = BloomFilter.from_json(legacy)
    assert bf.hash_name == HASH_BLAKE2B
    assert bf.might_contain(keys).all()


def test_an_unknown_hash_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"'sha9'.*upgrade"):
        key_hashes(["a"], "sha9")


def test_a_null_key_is_refused() -> None:
    with pytest.raises(ValueError, match="null"):
        key_hashes(pa.array(["a", None]))


def _sidecar_table(root: str) -> tuple[Table, str]:
    """A keyed table whose file's bloom filter is a sidecar object, and that object's path."""
    t = Table.create(
        open_store(root), KeyedProperties.of("id"), TableSettings(local_entry_cache=False)
    )
    t.upsert(pa.table({"id": list(range(6000)), "v": ["x"] * 6000}))
    stats = t.entry(t.snapshot().instant_time).metadata["write_stats"]
    paths = [s["bloom_path"] for s in stats if s.get("bloom_path")]
    assert paths, stats
    return t, paths[0]


@pytest.mark.parametrize("damage", ["corrupt", "delete"])
def test_a_damaged_sidecar_never_refuses_a_write(
    tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    t, path = _sidecar_table(str(tmp_path / "t"))
    local = Path(tmp_path / "t" / path)
    if damage == "delete":
        local.unlink()
    else:
        local.write_bytes(local.read_bytes()[:-4] + b"XXXX")
    with caplog.at_level("WARNING"):
        t.upsert(pa.table({"id": [5, 7000], "v": ["new", "new"]}))
    assert any(path in r.getMessage() for r in caplog.records)
    rows = {r["id"]: r["v"] for r in t.read().to_pylist()}
    assert len(rows) == 6001 and rows[5] == rows[7000] == "new" and rows[4] == "x"


@pytest.mark.parametrize("hash_name", [HASH_WORDS, HASH_BLAKE2B])
def test_a_filter_built_in_chunks_sets_exactly_the_probed_positions(
    hash_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Filters are stored and probed by other writers: however a build chunks its keys, it
    sets exactly the bits `_hashed_positions` names (chunks of 64 cells cut the keys into
    many pieces, the last one short)."""
    monkeypatch.setattr(bloom, "_CHUNK_CELLS", 64)
    keys = pa.array([f"key-{i}" for i in range(1_001)])
    built = BloomFilter.build_sized(keys, 9_973, 7, hash_name)
    h1, h2 = key_hashes(keys, hash_name)
    expected = np.zeros(9_973, dtype=bool)
    expected[bloom._hashed_positions(h1, h2, 9_973, 7, hash_name).ravel()] = True
    assert built.bits == np.packbits(expected, bitorder="little").tobytes()
    if hash_name == HASH_WORDS:
        assert BloomFilter.build(keys, 0.01).might_contain(keys).all()


@pytest.mark.parametrize("form", ["array", "chunks", "list"])
def test_a_builder_hashing_its_keys_in_parts_sets_the_same_bits(
    form: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A builder hashes `ADD_KEYS` keys at a time (what adding a row group of keys holds):
    the filter is the one the keys hashed at once make, whatever form they come in."""
    keys = [f"key-{i}" for i in range(1_001)]
    whole = BloomFilter.build(keys, 0.01)
    monkeypatch.setattr(bloom, "ADD_KEYS", 100)
    arr = pa.array(keys)
    given = {"array": arr, "chunks": pa.chunked_array([arr[:150], arr[150:]]), "list": keys}
    builder = BloomBuilder(len(keys), 0.01)
    builder.add(given[form])
    assert builder.finish() == whole


def test_adding_a_row_group_of_keys_holds_a_part_of_their_hashes() -> None:
    """Adding 131,072 keys (a row group of a rewrite) allocates, beside the filter's bits,
    about what `ADD_KEYS` keys' hashes and bit positions take, not the row group's (7 MiB
    of positions and 2 MiB of hashes at fpp 0.01), counted by tracemalloc (numpy's arrays)."""
    keys = pa.array([f"{i:012d}" for i in range(131_072)])
    builder = BloomBuilder(len(keys), 0.01)
    tracemalloc.start()
    try:
        builder.add(keys)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak <= 4 * 1024 * 1024, peak  # 10 MiB when the row group was hashed at once
    assert builder.finish() == BloomFilter.build(keys, 0.01)
