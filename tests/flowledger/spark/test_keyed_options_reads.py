"""The keyed writers' table properties on the driver: the table as opened already holding the
properties a write asks for is not created (opened, listed and read) again, and asking for
other properties is still refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from flowledger.spark.errors import SparkWriteError
from flowledger.spark.keyed_options import keyed_options, requested_properties, resolve_properties
from storage import StoreSettings, open_store
from tests.support.store_calls import counted_calls
from timeline import Table, WriteOperation
from timeline.keyed import KeyedProperties, KeyScope, MergeMode, OnDuplicate, TableType
from timeline.keyed.properties import PropertiesError

pytestmark = pytest.mark.unit

OPTIONS = {"recordKey": "id", "orderingField": "ts", "partitionBy": "part"}


def test_the_asked_properties_of_an_opened_table_cost_no_request(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}/t", StoreSettings(fsync=False))
    Table.create(store, KeyedProperties.of("id", ordering_field="ts", partition_by="part"))
    table = Table.open(store)
    assert table.properties is not None  # read once, as every keyed write reads them
    calls = counted_calls(store)
    same, props = resolve_properties(table, OPTIONS)
    assert same is table and props == table.properties
    assert props.record_key == ("id",) and props.partition_by == ("part",)
    assert sum(calls.values()) == 0, calls


def test_other_properties_than_the_tables_are_refused(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}/t", StoreSettings(fsync=False))
    Table.create(store, KeyedProperties.of("id", ordering_field="ts", partition_by="part"))
    with pytest.raises(PropertiesError, match="cannot change to record key other"):
        resolve_properties(Table.open(store), {**OPTIONS, "recordKey": "other"})


def test_a_new_table_is_created_with_the_reads_of_table_create_alone(tmp_path: Path) -> None:
    """A session's first write opens the table (it may exist) and finds its listing empty:
    it creates the table reading and listing no more than a program's `Table.create` does
    (it does not read the properties a new table cannot have, nor open the table again)."""
    python = open_store(f"file://{tmp_path}/python", StoreSettings(fsync=False))
    python_calls = counted_calls(python)
    Table.create(python, KeyedProperties.of("id", ordering_field="ts", partition_by="part"))
    spark = open_store(f"file://{tmp_path}/spark", StoreSettings(fsync=False))
    spark_calls = counted_calls(spark)
    table, props = resolve_properties(Table.open(spark), OPTIONS)
    assert table.properties == props and props.ordering_field == "ts"
    for kind in (("get_object", "open_read"), ("list", "list_page")):
        assert sum(spark_calls[n] for n in kind) <= sum(python_calls[n] for n in kind), (
            spark_calls, python_calls,
        )  # fmt: skip


def test_the_first_write_creates_the_keyed_table(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}/t", StoreSettings(fsync=False))
    _, props = resolve_properties(Table.open(store), OPTIONS)
    assert props.ordering_field == "ts"
    assert Table.open(store).properties == props


def test_the_operation_option_names_a_write_operation() -> None:
    """Spark's `operation` option (or Hudi's name for it) takes the operations' names in any
    case; another name is refused in one line naming those offered."""
    got = keyed_options({"hoodie.datasource.write.operation": "UPSERT"})
    assert got is not None and got.operation is WriteOperation.UPSERT and got.upsert
    deletes = keyed_options({"operation": "delete"})
    assert deletes is not None and not deletes.upsert
    assert keyed_options({"operation": "bulk_insert"}) is None  # a plain append
    with pytest.raises(SparkWriteError, match="must be one of upsert, insert, delete, not 'merge'"):
        keyed_options({"operation": "merge"})


def test_table_options_parse_to_enums_and_refuse_other_names_in_one_line() -> None:
    """tableType, mergeMode and keyScope (or their Hudi names, with Hudi's values) become
    the table's enums; onDuplicate likewise; another value is refused in one line naming
    the values offered."""
    props = requested_properties(
        {
            "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.table.type": "MERGE_ON_READ",
            "hoodie.record.merge.mode": "EVENT_TIME_ORDERING",
            "hoodie.index.type": "BLOOM",
        }
    )
    assert props is not None
    assert props.table_type is TableType.MERGE_ON_READ
    assert props.merge_mode is MergeMode.EVENT_TIME and props.key_scope is KeyScope.PARTITION
    got = keyed_options({"operation": "insert", "onDuplicate": "DROP"})
    assert got is not None and got.on_duplicate is OnDuplicate.DROP
    bad = [
        ({"recordKey": "id", "tableType": "mor"}, "tableType must be one of copy_on_write, "
         "merge_on_read, not 'mor'"),
        ({"recordKey": "id", "mergeMode": "latest"}, "mergeMode must be one of commit_time, "
         "event_time, commit_time_ordering, event_time_ordering, not 'latest'"),
        ({"recordKey": "id", "keyScope": "table"}, "keyScope must be one of global, partition, "
         "global_bloom, global_simple, record_index, bloom, simple, not 'table'"),
    ]  # fmt: skip
    for options, message in bad:
        with pytest.raises(SparkWriteError) as e:
            requested_properties(options)
        assert str(e.value) == message
    with pytest.raises(SparkWriteError) as e:
        keyed_options({"operation": "insert", "onDuplicate": "keep"})
    assert str(e.value) == "onDuplicate must be one of fail, drop, not 'keep'"


def test_the_keyed_index_comes_from_the_option_else_the_session() -> None:
    """`keyedIndex` (any case of the name and value) wins over `spark.flowledger.keyedIndex`;
    neither leaves the setting's default; another value is refused in one line."""
    from flowledger.spark.conf import table_settings
    from timeline import KeyedIndex

    conf = {"spark.flowledger.keyedIndex": "record_level"}
    assert table_settings({}).keyed_index is KeyedIndex.AUTO
    assert table_settings(conf).keyed_index is KeyedIndex.RECORD_LEVEL
    assert table_settings(conf, {"KEYEDINDEX": "RANGE_BLOOM"}).keyed_index is (
        KeyedIndex.RANGE_BLOOM
    )
    with pytest.raises(SparkWriteError) as e:
        table_settings({}, {"keyedIndex": "bloom"})
    assert str(e.value) == "keyedIndex must be one of auto, range_bloom, record_level, not 'bloom'"
