"""The table settings' and properties' named choices outside keyed tables: `keyed_index` and
the partition naming are `Choice`s (timeline/choice.py) held as members, stored as their
names, and a name this version does not offer is refused in one line naming the ones it does."""

from __future__ import annotations

import json
import pickle
from dataclasses import replace
from pathlib import Path

import pytest

from storage import open_json, open_store, seal_json
from timeline import (
    KeyedIndex,
    PartitionNaming,
    PartitionNamingError,
    Table,
    TableSettings,
    TableType,
)
from timeline.choice import Choice
from timeline.keyed import KeyedProperties, MergeMode
from timeline.keyed.properties import FORMAT, PROPERTIES_KEY

pytestmark = pytest.mark.unit


def test_every_choice_shares_the_one_base() -> None:
    for choice in (KeyedIndex, PartitionNaming, TableType, MergeMode):
        assert issubclass(choice, Choice)


@pytest.mark.parametrize(
    ("given", "held"),
    [("auto", KeyedIndex.AUTO), (" Record_Level ", KeyedIndex.RECORD_LEVEL),
     (KeyedIndex.RANGE_BLOOM, KeyedIndex.RANGE_BLOOM)],
)  # fmt: skip
def test_keyed_index_is_held_as_its_member(given: str, held: KeyedIndex) -> None:
    s = TableSettings(keyed_index=given)  # type: ignore[arg-type]
    assert s.keyed_index is held
    assert s.keyed_index == held.value  # a member compares equal to its stored name
    assert pickle.loads(pickle.dumps(s)).keyed_index is held  # shipped to Spark tasks


def test_an_unknown_keyed_index_is_refused_naming_the_allowed_values() -> None:
    with pytest.raises(ValueError) as info:
        TableSettings(keyed_index="btree")  # type: ignore[arg-type]
    assert (
        str(info.value) == "keyed_index must be one of auto, range_bloom, record_level, not 'btree'"
    )
    with pytest.raises(ValueError, match="keyed_index must be one of"):
        replace(TableSettings(), keyed_index="bloom")  # type: ignore[arg-type]


def test_partition_naming_round_trips_through_the_properties_object(tmp_path: Path) -> None:
    props = KeyedProperties.of("id", partition_by="p")
    assert props.partition_naming is PartitionNaming.HIVE
    stored = json.loads(json.dumps(props.to_json()))
    assert stored["partition_naming"] == "hive"  # the name, as tables always stored it
    back = KeyedProperties.from_json(stored)
    assert back.partition_naming is PartitionNaming.HIVE
    older = {k: v for k, v in stored.items() if k != "partition_naming"}
    assert KeyedProperties.from_json(older).partition_naming is PartitionNaming.LEGACY
    store = open_store(str(tmp_path / "t"))
    table = Table.create(store, props)
    assert table.partition_naming() is PartitionNaming.HIVE
    assert open_json(store.get(PROPERTIES_KEY), "")["partition_naming"] == "hive"


def test_an_unknown_partition_naming_in_stored_properties_is_one_line(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "t"))
    body = {**KeyedProperties.of("id").to_json(), "partition_naming": "v9"}
    store.put_if_absent(PROPERTIES_KEY, seal_json({"format": FORMAT, **body}))
    with pytest.raises(PartitionNamingError) as info:
        Table.open(store).properties  # noqa: B018 - reading them is the test
    message = str(info.value)
    assert "\n" not in message
    assert message == (
        "partition naming must be one of hive, legacy, not 'v9'; "
        "the table was written by a newer flowledger"
    )
