"""How a Spark keyed write is spread: an insert of table-wide keys into a partitioned table
runs one task per group of partitions, a key arriving in two partitions of one batch is
written again as one shard, and a small input is written on the driver — each leaving the
table the Python path leaves (flowledger/spark/keyed_shards.py, small_input.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import flowledger.spark as fs
from flowledger.spark.small_input import DRIVER_TASK, THRESHOLD_CONF, estimated_bytes
from storage import open_store
from tests.support.keyed_spark import PROPS, apply_python, apply_spark, comparable, spark_frame
from timeline import Table, data_prefix

pytestmark = pytest.mark.spark

LOAD = [(i, i % 8, i, 1) for i in range(400)]
#: Key 1000 arrives in every partition (the highest ts wins under event_time), the rest once.
CROSS = [*[(1000, p, p, p) for p in range(8)], *[(i, i % 8, i, 2) for i in range(400, 440)]]


def _tasks(table: Table, instant: str) -> set[str]:
    """The Spark partitions (or the driver) that wrote the commit's files, from their names
    (`<group>_<partition>-<attempt>_<instant>.parquet`)."""
    names = [f.path.rsplit("/", 1)[-1] for f in table.entry(instant).added]
    return {n.split("_")[1].split("-")[0] for n in names}


def _unnamed(table: Table, instant: str) -> list[str]:
    """Objects under the instant's data prefix that its commit does not name."""
    entry = table.entry(instant)
    named = {f.path for f in entry.added}
    named |= {str(s["bloom_path"]) for s in entry.metadata["write_stats"] if s.get("bloom_path")}
    return [o.key for o in table.store.list(data_prefix(instant)) if o.key not in named]


@pytest.fixture
def on_driver(registered: Any) -> Iterator[Any]:
    """The session with small writes on the driver (the shared session turns it off)."""
    before = registered.conf.get(THRESHOLD_CONF, None)
    registered.conf.set(THRESHOLD_CONF, str(10 * 1024 * 1024))
    yield registered
    if before is None:
        registered.conf.unset(THRESHOLD_CONF)
    else:
        registered.conf.set(THRESHOLD_CONF, before)


def test_insert_of_global_keys_is_spread_over_tasks(registered: Any, tmp_path: Path) -> None:
    steps = [("insert", LOAD), ("insert", [(i, i % 8, i, 2) for i in range(400, 480)])]
    uri = str(tmp_path / "spark")
    instants = apply_spark(registered, uri, "native", steps, PROPS)
    table = Table.open(open_store(uri))
    reference = apply_python(tmp_path / "python", steps)
    assert comparable(table, instants) == comparable(*reference)
    assert all(len(_tasks(table, t)) == 2 for t in instants)  # local[2]: both cores
    assert all(_unnamed(table, t) == [] for t in instants)


def test_a_key_in_two_partitions_of_an_insert_is_written_as_one_shard(
    registered: Any, tmp_path: Path
) -> None:
    steps = [("insert", LOAD), ("insert", CROSS)]
    uri = str(tmp_path / "spark")
    instants = apply_spark(registered, uri, "datasource", steps, PROPS)
    table = Table.open(open_store(uri))
    reference = apply_python(tmp_path / "python", steps)
    got = comparable(table, instants)
    assert got == comparable(*reference)
    assert [r[:4] for r in got if r[0] == 1000] == [(1000, 7, 7, 7)]  # one record: ts 7 won
    # Written again in one task; what the spread attempt wrote was swept.
    assert _tasks(table, instants[1]) == {"00000"}
    assert _unnamed(table, instants[1]) == []


def _cached(df: Any) -> Any:
    """`df` cached: Spark then knows its size (rows made in Python have no estimate)."""
    df = df.cache()
    df.count()
    return df


def test_a_small_input_is_written_on_the_driver(on_driver: Any, tmp_path: Path) -> None:
    steps: list[tuple[str, list[Any]]] = [
        ("insert", LOAD),
        ("upsert", CROSS),
        ("delete", [3, 1000, 7]),
    ]
    uri = str(tmp_path / "spark")
    instants = []
    for op, rows in steps:
        if op == "delete":
            df = _cached(on_driver.createDataFrame([(k,) for k in rows], "id long"))
        else:
            df = _cached(spark_frame(on_driver, rows))
        assert 0 < (estimated_bytes(df) or 0) < 1024 * 1024
        info = fs.write(df, uri, options={**PROPS, "operation": op})
        instants.append(info.instant_time)
    table = Table.open(open_store(uri))
    reference = apply_python(tmp_path / "python", steps)
    assert comparable(table, instants) == comparable(*reference)
    assert all(_tasks(table, t) == {DRIVER_TASK} for t in instants)


def test_the_threshold_sends_a_larger_input_to_the_tasks(on_driver: Any, tmp_path: Path) -> None:
    on_driver.conf.set(THRESHOLD_CONF, "100")  # bytes: below the estimate of LOAD
    uri = str(tmp_path / "spark")
    info = fs.write(
        _cached(spark_frame(on_driver, LOAD)), uri, options={**PROPS, "operation": "insert"}
    )
    assert DRIVER_TASK not in _tasks(Table.open(open_store(uri)), info.instant_time)
