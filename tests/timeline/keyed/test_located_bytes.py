"""The located-bytes budget: small files' bytes kept from the locate step for their rewrite,
never more than the budget, each handed over once."""

from __future__ import annotations

import pytest

from timeline.keyed.write.located import LocatedBytes
from timeline.metadata import DataFile

pytestmark = pytest.mark.unit


def _file(name: str) -> DataFile:
    return DataFile(path=f"data/{name}.parquet", rows=1, size=10)


def test_offers_beyond_the_budget_are_refused_and_smaller_ones_still_fit() -> None:
    kept = LocatedBytes(10)
    assert kept.offer(_file("a"), b"x" * 6)
    assert not kept.offer(_file("b"), b"x" * 5)  # 11 > 10
    assert kept.offer(_file("c"), b"x" * 4)
    assert kept.used == 10
    assert kept.take(_file("b")) is None


def test_a_file_is_taken_once_and_its_bytes_leave_the_budget() -> None:
    kept = LocatedBytes(10)
    kept.offer(_file("a"), b"abc")
    assert kept.take(_file("a")) == b"abc"
    assert kept.take(_file("a")) is None
    assert kept.used == 0 and kept.taken == 1


def test_what_no_rewrite_takes_is_dropped() -> None:
    kept = LocatedBytes(100)
    for n in "abc":
        kept.offer(_file(n), b"x" * 10)
    kept.keep_only({_file("b").path})
    assert kept.used == 10
    assert kept.take(_file("a")) is None and kept.take(_file("b")) == b"x" * 10


def test_a_zero_budget_keeps_nothing() -> None:
    kept = LocatedBytes(0)
    assert not kept.offer(_file("a"), b"x")
    assert kept.used == 0


def test_holds_tells_what_is_kept() -> None:
    kept = LocatedBytes(10)
    kept.offer(_file("a"), b"x")
    assert kept.holds(_file("a")) and not kept.holds(_file("b")) and not kept.holds(None)
