"""Composite record keys: their text form (`col1:v1,col2:v2`, Hudi's complex key) never
lets two distinct keys share one text, so values holding `,<key column>:` no longer merge two
records into one; keys without such values keep the text they always had."""

from __future__ import annotations

import datetime
import itertools
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage import StoreSettings, open_store
from tests.support.store_calls import counted_calls
from timeline import SchemaMismatch, Table, TableSettings
from timeline.keyed import RECORD_KEY_COL, KeyedProperties, build_index, index_view
from timeline.keyed.keys import key_texts, record_keys

pytestmark = pytest.mark.unit

AB = KeyedProperties.of("a,b")
#: The two keys whose unescaped texts were both `a:x,b:y,b:z`.
LOOK_ALIKES = pa.table({"a": ["x,b:y", "x"], "b": ["z", "y,b:z"], "v": [1, 2]})


def _table(tmp_path: Path, table_type: str, with_index: bool) -> Table:
    store = open_store("file://" + str(tmp_path / "t"), StoreSettings(fsync=False))
    props = KeyedProperties.of("a,b", table_type=table_type)
    t = Table.create(store, props, TableSettings(local_entry_cache=False))
    if with_index:
        t.upsert(pa.table({"a": ["seed"], "b": ["seed"], "v": [0]}))
        build_index(t)
        assert index_view(t.state()) is not None
    return t


def _rows(t: Table) -> dict[tuple[str, str], int]:
    return {(r["a"], r["b"]): r["v"] for r in t.read().to_pylist() if r["a"] != "seed"}


@pytest.mark.parametrize("with_index", [False, True], ids=["ranges-bloom", "record-index"])
@pytest.mark.parametrize("table_type", ["copy_on_write", "merge_on_read"])
def test_look_alike_composite_keys_are_two_records(
    tmp_path: Path, table_type: str, with_index: bool
) -> None:
    t = _table(tmp_path, table_type, with_index)
    t.upsert(LOOK_ALIKES)
    assert _rows(t) == {("x,b:y", "z"): 1, ("x", "y,b:z"): 2}
    t.upsert(pa.table({"a": ["x"], "b": ["y,b:z"], "v": [20]}))  # updates one of them
    assert _rows(t) == {("x,b:y", "z"): 1, ("x", "y,b:z"): 20}
    t.delete(pa.table({"a": ["x,b:y"], "b": ["z"]}))
    assert _rows(t) == {("x", "y,b:z"): 20}
    if table_type == "merge_on_read":
        t.maintenance.compact()
        assert _rows(t) == {("x", "y,b:z"): 20}
    keys = [r[RECORD_KEY_COL] for r in t.read().to_pylist() if r["a"] != "seed"]
    assert keys == ["a:x,b:y\\,b:z"]


def test_keys_without_look_alike_values_keep_their_text() -> None:
    rows = pa.table({"a": ["Smith, John", "C:\\dir", "x:y", "1"], "b": [1, 2, 3, 4]})
    assert record_keys(rows, AB) == ["a:Smith, John,b:1", "a:C:\\dir,b:2", "a:x:y,b:3", "a:1,b:4"]
    one = KeyedProperties.of("a")
    assert record_keys(pa.table({"a": ["x,a:y\\"]}), one) == ["x,a:y\\"]  # one column: as is
    assert record_keys(LOOK_ALIKES, AB) == ["a:x\\,b:y,b:z", "a:x,b:y\\,b:z"]


#: The names the property tries: plain, with the escape character, with a colon.
_NAMES = [("a", "b"), ("a", "b", "c"), ("a\\", "b"), ("k:1", "k")]


def _values(names: tuple[str, ...]) -> st.SearchStrategy[str]:
    """Values made of what matters: separators, the escape, colons and `,<name>:` pieces."""
    pieces = [",", ":", "\\", "x", *(f",{n}:" for n in names), *names]
    return st.lists(st.sampled_from(pieces), max_size=5).map("".join)


def _texts(names: tuple[str, ...], tuples: Sequence[tuple[str, ...]]) -> list[str]:
    columns = [pa.array([t[i] for t in tuples], pa.string()) for i in range(len(names))]
    return [str(x) for x in key_texts(names, columns).to_pylist()]


def _splits(names: tuple[str, ...], text: str) -> list[tuple[str, ...]]:
    """Every tuple whose unescaped complex-key text is `text` (`n1:v1,n2:v2...`)."""
    head = f"{names[0]}:"
    if not text.startswith(head):
        return []
    rest = text[len(head) :]
    if len(names) == 1:
        return [(rest,)]
    sep = f",{names[1]}:"
    out = []
    at = rest.find(sep)
    while at >= 0:
        out += [(rest[:at], *t) for t in _splits(names[1:], rest[at + 1 :])]
        at = rest.find(sep, at + 1)
    return out


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(_NAMES).flatmap(lambda n: st.tuples(st.just(n), st.data())))
def test_the_text_of_a_composite_key_is_injective(
    case: tuple[tuple[str, ...], st.DataObject],
) -> None:
    names, data = case
    values = _values(names)
    tuples = data.draw(st.lists(st.tuples(*[values] * len(names)), min_size=1, unique=True))
    # The adversary: every other tuple that the unescaped form would give the same text.
    plain = [",".join(f"{n}:{v}" for n, v in zip(names, t, strict=True)) for t in tuples]
    tuples += sorted({u for p in plain for u in _splits(names, p)} - set(tuples))
    texts = _texts(names, tuples)
    assert len(set(texts)) == len(tuples), sorted(zip(texts, tuples, strict=True))


@pytest.mark.parametrize("names", _NAMES, ids=lambda n: ",".join(n))
def test_the_text_of_a_composite_key_is_injective_over_every_small_tuple(
    names: tuple[str, ...],
) -> None:
    """Every tuple of values up to 3 characters drawn from the separators, escape and names'
    characters: no two share a text (an exhaustive check beside the property)."""
    alphabet = sorted({",", ":", "\\", *"".join(names)})[:5]
    words = [""]
    for _ in range(3):
        words += [w + c for w in words if len(w) == len(words[-1]) for c in alphabet]
    words = sorted(set(words))
    k = len(names)
    if k == 3:
        words = [w for w in words if len(w) <= 2]
    tuples = list(itertools.product(words, repeat=k))
    texts = _texts(names, tuples)
    assert len(set(texts)) == len(tuples)


def test_a_key_column_named_with_the_escape_character_escapes_every_key() -> None:
    """With a name holding `\\`, escaping a value also changes the `,<name>:` piece it
    holds, so a plain text could equal an escaped one: such tables escape every key."""
    names = ("a\\", "b")
    tuples = [("", ",a\\:"), ("", "\\,a\\\\:")]  # escaped vs plain would read alike
    texts = _texts(names, tuples)
    assert len(set(texts)) == 2
    assert _texts(names, [("x", "y")]) == ["a\\:x,b:y"]  # values without `,` or `\`: as ever


def test_keys_to_delete_compare_as_typed_values(tmp_path: Path) -> None:
    """A key given as 1 for a double column, or a date as text, is the stored key; a value
    that does not convert to the column's type is refused, nothing deleted."""
    store = open_store("file://" + str(tmp_path / "t"), StoreSettings(fsync=False))
    t = Table.create(store, KeyedProperties.of("k,d"), TableSettings(local_entry_cache=False))
    day = datetime.date(2026, 1, 1)
    t.upsert(pa.table({"k": [1.0, 2.5], "d": [day, day], "v": [1, 2]}))
    t.delete(pa.table({"k": [1], "d": ["2026-01-01"]}))
    assert [r["k"] for r in t.read().to_pylist()] == [2.5]
    with pytest.raises(SchemaMismatch, match="column k is double in the table"):
        t.delete(pa.table({"k": ["two and a half"], "d": [day]}))
    assert t.read().num_rows == 1


def test_a_handle_that_has_not_seen_the_key_columns_types_deletes_from_a_fresh_read(
    tmp_path: Path,
) -> None:
    """Keys to delete are typed from the handle's last state when it states the key columns
    (no request); a handle opened before any data was written reads the table first, so a
    key given as 1 for a double column still deletes the stored 1.0."""
    store = open_store("file://" + str(tmp_path / "t"), StoreSettings(fsync=False))
    early = Table.create(store, KeyedProperties.of("k"), TableSettings(local_entry_cache=False))
    Table.open(store).upsert(pa.table({"k": [1.0, 2.5], "v": [1, 2]}))
    early.delete([1])
    assert [r["k"] for r in Table.open(store).read().to_pylist()] == [2.5]


def test_a_delete_by_keys_after_a_write_reads_the_timeline_once(tmp_path: Path) -> None:
    """The handle's last state already states the key columns' types, so the delete lists
    the timeline only as its write begins (and for its instant time)."""
    store = open_store("file://" + str(tmp_path / "t"), StoreSettings(fsync=False))
    t = Table.create(store, KeyedProperties.of("k"), TableSettings(local_entry_cache=False))
    t.upsert(pa.table({"k": [1.0, 2.5], "v": [1, 2]}))
    t.upsert(pa.table({"k": [4.0], "v": [4]}))
    calls = counted_calls(store)
    t.delete([2.5])
    assert calls["list"] == 2, calls
    assert sorted(r["k"] for r in t.read().to_pylist()) == [1.0, 4.0]
