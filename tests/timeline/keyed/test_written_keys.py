"""What a streamed insert keeps: the keys it has written (integer keys that come as
progressions kept as three numbers, so what a stream holds for them does not grow with its
commit; others as they came; a key written before is found either way), and no batch of the
source once it is handed on."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from timeline.keyed.write import chained, tables_of
from timeline.keyed.write.written_keys import KeyRuns, WrittenKeys, progression


@pytest.mark.unit
def test_a_progression_is_found_only_in_integers_rising_by_one_step() -> None:
    assert progression(pa.array(np.arange(10, 50, 4))) == (10, 46, 4)
    assert progression(pa.chunked_array([[7, 8], [9]])) == (7, 9, 1)
    assert progression(pa.array([5])) == (5, 5, 1)
    assert progression(pa.array([1, 2, 4])) is None  # a gap
    assert progression(pa.array([3, 2, 1])) is None  # falling
    assert progression(pa.array([1, 3, 3, 5])) is None  # the ends fit, the middle not
    assert progression(pa.array(["1", "2"])) is None
    assert progression(pa.array([1, None, 3])) is None


@pytest.mark.unit
def test_ids_written_in_order_are_held_as_one_progression_and_still_matched() -> None:
    seen = WrittenKeys(pa.int64())
    for lo in range(0, 1_000_000, 100_000):  # ten batches of ids split by a hash of 20
        batch = pa.array(np.arange(lo + 3, lo + 100_000, 20))
        assert not seen.repeated(batch).any()
        seen.add(batch)
    assert seen.held_bytes == 0
    assert seen.written.runs() == [(3, 999_983, 20)]
    probe = pa.array([3, 4, 500_003, 999_983, 999_984, 2_000_000])
    assert seen.repeated(probe).tolist() == [True, False, True, True, False, False]


@pytest.mark.unit
def test_keys_in_no_order_are_held_and_matched_with_the_progressions() -> None:
    seen = WrittenKeys(pa.int64())
    seen.add(pa.array(np.arange(0, 100)))
    shuffled = pa.array(np.random.default_rng(1).permutation(np.arange(1_000, 1_100)))
    seen.add(shuffled)
    assert seen.held_bytes == shuffled.nbytes
    seen.repeated(pa.array([0, 1_099]))  # the range written is what `repeated` saw
    assert seen.repeated(pa.array([50, 150, 1_050])).tolist() == [True, False, True]


@pytest.mark.unit
def test_key_runs_give_back_their_keys_as_record_key_text_in_order() -> None:
    runs = KeyRuns()
    runs.add(pa.array(np.arange(0, 10, 2)))
    runs.add(pa.array(np.arange(10, 16, 2)))  # carries the progression on
    runs.add(pa.array([40, 31]))
    assert runs.runs() == [(0, 14, 2)] and runs.count == 10
    texts = pa.chunked_array(list(runs.texts(chunk=3)), pa.string()).to_pylist()
    assert texts == ["0", "2", "4", "6", "8", "10", "12", "14", "40", "31"]
    names = KeyRuns()
    names.add(pa.array(["b", "a"]))
    assert pa.chunked_array(list(names.texts())).to_pylist() == ["b", "a"]


@pytest.mark.unit
def test_a_streamed_batch_handed_on_is_let_go_before_the_next_is_read() -> None:
    # The consumer drops each table once it has used it; the source then finds no batch of
    # its own still alive when it makes the next (Arrow's allocations back where they were).
    batch_bytes = 8 << 20
    base = pa.total_allocated_bytes()
    seen: list[int] = []

    def source() -> Iterator[pa.RecordBatch]:
        for i in range(5):
            seen.append(pa.total_allocated_bytes() - base)
            yield pa.record_batch({"a": pc.add(pa.array(np.arange(batch_bytes // 8)), i)})

    batches = tables_of(source())
    first, second = next(batches), next(batches)
    it = chained([first, second], batches)
    del first, second
    count = 0
    while (t := next(it, None)) is not None:
        count += t.num_rows
        del t
    assert count == 5 * (batch_bytes // 8)
    # Two batches read ahead (the first two, as an insert looks at them) and then one at a
    # time: never a batch already handed on and dropped.
    assert seen[0] < batch_bytes and seen[1] < 2 * batch_bytes
    assert all(b < batch_bytes for b in seen[2:]), [b >> 20 for b in seen]
