"""What a keyed write through `flowledger.spark.save` asks of Spark and of the store besides
its data: the session's conf read key by key (not copied whole through py4j), and the
table's store the writer holds reused by the shard written on the driver and by the
provenance hook (no second client opened), with the same commit and provenance; and a load,
an upsert and a delete on the driver LIST the table no more than the Python path."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import flowledger.spark as fs
from flowledger.slice_provenance import slice_uuid
from flowledger.spark import keyed_shards, lineage, table_handles
from flowledger.spark.commit_info import REPO_CONF_KEY
from flowledger.spark.conf import S3A, WRITE_KEYS, conf_of, write_conf
from flowledger.spark.small_input import THRESHOLD_CONF
from provenance import ProvenanceRepository
from storage import ObjectStore, open_store
from tests.support.servers import S3Endpoint
from timeline import KeyedProperties, Table

pytestmark = pytest.mark.spark

HEARTBEAT_MISSES = "spark.flowledger.hoodie.client.heartbeat.tolerable.misses"
PROPS = KeyedProperties.of("id")


@pytest.fixture
def on_driver(registered: Any) -> Iterator[Any]:
    """The session writing small keyed inputs on the driver (the default a user has)."""
    registered.conf.set(THRESHOLD_CONF, str(10 * 1024 * 1024))
    try:
        yield registered
    finally:
        registered.conf.set(THRESHOLD_CONF, "-1")


def test_write_conf_is_the_sessions_conf_for_a_writes_keys(registered: Any) -> None:
    """The keys a write reads have the values `conf_of` finds: those the session was built
    with (its s3a endpoint) and those set at run time."""
    registered.conf.set(HEARTBEAT_MISSES, "7")
    try:
        got = write_conf(registered)
        whole = conf_of(registered)
    finally:
        registered.conf.unset(HEARTBEAT_MISSES)
    assert got == {k: v for k, v in whole.items() if k in WRITE_KEYS}
    assert got[HEARTBEAT_MISSES] == "7"
    assert got[S3A + "endpoint"] == whole[S3A + "endpoint"]
    assert got[REPO_CONF_KEY] == registered.conf.get(REPO_CONF_KEY)


@pytest.mark.minio
def test_a_keyed_save_copies_no_conf_and_opens_no_second_store(
    on_driver: Any, tmp_path: Path, minio: S3Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An upsert on the driver into a table over s3a: the SparkContext's conf is not copied,
    neither the driver's shard nor the provenance hook opens a store of its own, and the
    new slice's provenance is recorded."""
    spark = on_driver
    uri = f"s3a://{minio.new_bucket()}/t"
    opts = {"recordKey": "id", "operation": "upsert"}
    path = tmp_path / "a.parquet"
    pq.write_table(pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]}), path)
    fs.save(spark.read.parquet(str(path)), uri, options=opts)  # opens the table handle

    copies: list[str] = []
    opened: list[str] = []
    context = type(spark.sparkContext)
    get_conf = context.getConf

    def copied(sc: Any) -> Any:
        copies.append("conf")
        return get_conf(sc)

    monkeypatch.setattr(context, "getConf", copied)

    def counted(uri: str, settings: Any = None) -> Any:
        opened.append(uri)
        return open_store(uri, settings)

    monkeypatch.setattr(keyed_shards, "open_store", counted)
    monkeypatch.setattr(lineage, "open_store", counted)
    df = spark.read.parquet(str(path)).where("id = 2").cache()
    info = fs.save(df, uri, options=opts)
    df.unpersist()

    assert copies == []
    assert [u for u in opened if u.startswith("s3")] == []
    assert info.rows == 3  # the rewritten file slice holds the group's three records
    table = Table.open(open_store(f"s3://{uri[len('s3a://') :]}", minio.settings()))
    (newest,) = table.files()
    with ProvenanceRepository.open(open_store(spark.conf.get(REPO_CONF_KEY))) as prov:
        _, rows = prov.sql(
            "SELECT parent_uuids FROM provenance WHERE event_type = 'JOIN' "
            f"AND flowfile_uuid = '{slice_uuid(table.store.url(newest.path))}'"
        )
    assert len(rows) == 1 and len(rows[0][0]) == 2  # the job, and the slice it superseded


def _lists(store: ObjectStore, step: Callable[[], object]) -> int:
    """How many LISTs `store` makes while `step` runs."""
    before = store.stats.snapshot().get("LIST", 0)
    step()
    return store.stats.snapshot().get("LIST", 0) - before


@pytest.mark.minio
def test_keyed_writes_on_the_driver_list_no_more_than_the_python_path(
    on_driver: Any,
    tmp_path: Path,
    minio: S3Endpoint,
    monkeypatch: pytest.MonkeyPatch,
    opened: Callable[..., ObjectStore],
) -> None:
    """A load that creates the table, an upsert and a delete, each written on the driver
    through `fs.save`, LIST the table no more than the same steps through the Python path:
    the session makes the table keyed on the handle whose listing found it empty (it is
    not opened a second time), and the commit of a shard the driver wrote sweeps nothing
    (no task attempt can have left an object under its instant)."""
    spark = on_driver
    bucket = minio.new_bucket()
    uri = f"s3a://{bucket}/spark"
    handles: list[ObjectStore] = []

    def counted(store_uri: str, settings: Any = None) -> ObjectStore:
        handles.append(opened(store_uri, settings))
        return handles[-1]

    monkeypatch.setattr(table_handles, "open_store", counted)
    files = {
        "load": pa.table({"id": list(range(100)), "v": ["a"] * 100}),
        "upsert": pa.table({"id": [5, 7, 200], "v": ["b", "b", "n"]}),
        "delete": pa.table({"id": [1, 2]}),
    }
    for name, rows in files.items():
        pq.write_table(rows, tmp_path / f"{name}.parquet")

    def save(name: str, operation: str) -> None:
        df = spark.read.parquet(str(tmp_path / f"{name}.parquet"))
        fs.save(df, uri, options={"recordKey": "id", "operation": operation})

    python_store = opened(f"s3://{bucket}/python", minio.settings())
    held: list[Table] = []
    python = {
        "load": _lists(python_store, lambda: held.append(Table.create(python_store, PROPS))),
    }
    python["load"] += _lists(python_store, lambda: held[0].insert(files["load"]))
    python["upsert"] = _lists(python_store, lambda: held[0].upsert(files["upsert"]))
    python["delete"] = _lists(python_store, lambda: held[0].delete(files["delete"]))

    save("load", "insert")
    assert len(handles) == 1  # the table's one store, kept with its handle
    spark_lists = {
        "load": handles[0].stats.snapshot().get("LIST", 0),
        "upsert": _lists(handles[0], lambda: save("upsert", "upsert")),
        "delete": _lists(handles[0], lambda: save("delete", "delete")),
    }
    assert all(spark_lists[s] <= python[s] for s in python), (spark_lists, python)
    got = Table.open(handles[0]).read().sort_by("id")
    want = held[0].read().sort_by("id")
    assert got.select(["id", "v"]) == want.select(["id", "v"])
