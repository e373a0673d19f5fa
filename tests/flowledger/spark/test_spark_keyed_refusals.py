"""Refusals of keyed Spark writes reach the user as one line naming the fix, raised on the
driver as flowledger's own exception (not a line deep in a Python worker's traceback)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import flowledger.spark as fs
from flowledger.errors import FlowledgerError
from flowledger.spark.conf import S3A
from storage import ErrorKind, kind_of, open_store
from tests.support.servers import S3Endpoint
from timeline import DuplicateKeys, Table, TableSettings
from timeline.keyed import KeyedProperties

pytestmark = pytest.mark.spark


def _one_line(exc: BaseException) -> str:
    message = str(exc)
    assert "\n" not in message and "Traceback" not in message, message
    return message


@pytest.fixture
def wrong_secret(registered: Any) -> Iterator[Any]:
    """The session with a wrong s3a secret key for the test's duration."""
    key = S3A + "secret.key"
    before = registered.conf.get(key, None)
    registered.conf.set(key, "not-the-secret")
    yield registered
    if before is None:
        registered.conf.unset(key)
    else:
        registered.conf.set(key, before)


def test_an_insert_of_stored_keys_into_a_merge_on_read_table_is_one_line(
    registered: Any, tmp_path: Path
) -> None:
    """The delta commit's tasks find the stored keys; the driver raises `DuplicateKeys` with
    one line naming the keys and the fix, and nothing is committed."""
    uri = str(tmp_path / "mor")
    props = KeyedProperties.of("id", table_type="merge_on_read")
    table = Table.create(open_store(uri), props, TableSettings(compaction_mode="off"))
    table.upsert(pa.table({"id": [1, 2], "v": [0, 0]}))
    before = table.timeline().completed().write_timeline().by_completion()
    df = registered.createDataFrame([(2, 1), (3, 1)], "id long, v long")
    for put in (fs.save, fs.write):
        with pytest.raises(DuplicateKeys) as caught:
            put(df, uri, options={"operation": "insert"})
        _one_line(caught.value)
        assert caught.value.keys == ["2"]
    after = Table.open(open_store(uri))
    assert after.timeline().completed().write_timeline().by_completion() == before


@pytest.mark.parametrize("writer", ["datasource", "native"])
def test_unknown_table_and_bad_credentials_are_one_line(
    wrong_secret: Any, minio: S3Endpoint, tmp_path: Path, writer: str
) -> None:
    """A keyed write with a wrong secret key is refused on the driver before any job runs,
    as flowledger's access-denied error in one line; a delete from a table that does not
    exist (no record key to create it with) names the option to give."""
    spark = wrong_secret
    put = fs.save if writer == "datasource" else fs.write
    df = spark.createDataFrame([(1, 1)], "id long, v long")
    uri = f"s3a://{minio.new_bucket()}/t"
    with pytest.raises(Exception) as caught:
        put(df, uri, options={"operation": "upsert", "recordKey": "id"})
    assert kind_of(caught.value) in (ErrorKind.FORBIDDEN, ErrorKind.REFUSED), caught.value
    _one_line(caught.value)
    spark.conf.unset(S3A + "secret.key")
    with pytest.raises(FlowledgerError) as missing:
        put(df, str(tmp_path / "nowhere"), options={"operation": "delete"})
    assert "recordKey" in _one_line(missing.value)


def _refused_in_one_line(call: Any) -> str:
    """What `df.write/spark.read.format("flowledger")` shows the user when the data source's
    hook refuses: one line (PySpark's error class, then flowledger's message), no
    traceback; Spark adds the error's SQLSTATE (on a line of its own: the worker's report
    ends with a newline). Returns that line."""
    with pytest.raises(Exception) as caught:
        call()
    message = str(caught.value).strip()
    assert "Traceback" not in message and 'File "' not in message, message
    first, *rest = message.splitlines()
    assert [line.split(":")[0].strip() for line in rest] in ([], ["SQLSTATE"]), message
    assert first.startswith("[PYTHON_DATA_SOURCE_ERROR]"), message
    return first


@pytest.mark.parametrize("case", ["upsert", "bad_option", "credentials", "unknown_table"])
def test_data_source_refusals_are_one_line_naming_the_fix(
    wrong_secret: Any, minio: S3Endpoint, tmp_path: Path, case: str
) -> None:
    """`format("flowledger")` refusals raised in the Python worker that runs the data
    source's hooks reach the user as one line naming the fix: a keyed operation (use
    fs.save), a malformed option (its name), credentials the store refuses (the variables to
    check), a table with nothing to read (its URI)."""
    spark = wrong_secret
    if case != "credentials":
        spark.conf.unset(S3A + "secret.key")
    df = spark.createDataFrame([(1, 1)], "id long, v long")
    local = str(tmp_path / "t")
    if case == "upsert":
        writer = df.write.format("flowledger").mode("append").option("operation", "upsert")
        message = _refused_in_one_line(lambda: writer.save(local))
        assert "flowledger.spark.save" in message
    elif case == "bad_option":
        option = "hoodie.client.heartbeat.interval_in_ms"
        writer = df.write.format("flowledger").mode("append").option(option, "soon")
        message = _refused_in_one_line(lambda: writer.save(local))
        assert option in message and "whole number" in message
    elif case == "credentials":  # the data source takes the s3a settings at `register`
        uri = f"s3a://{minio.new_bucket()}/t"
        writer = df.write.format("flowledger").mode("append")
        try:
            fs.register(spark)
            message = _refused_in_one_line(lambda: writer.save(uri))
        finally:
            spark.conf.unset(S3A + "secret.key")
            fs.register(spark)
        assert "access denied" in message and "AWS_SECRET_ACCESS_KEY" in message
    else:
        reader = spark.read.format("flowledger")
        message = _refused_in_one_line(lambda: reader.load(local).collect())
        assert local in message and "no committed data" in message
