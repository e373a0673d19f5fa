"""Refusals of the data source's hooks, without Spark: a malformed option is flowledger's
one-line error naming it, and a refusal in a data source worker switches that worker to
reporting the message alone (elsewhere, and for other errors, nothing changes)."""

from __future__ import annotations

import os
import sys
import types
from typing import Any

import pytest

from flowledger.spark.conf import table_settings
from flowledger.spark.errors import SparkWriteError
from flowledger.spark.worker_errors import HIDE_TRACEBACK, one_line_refusals

pytestmark = pytest.mark.unit

BEAT = "hoodie.client.heartbeat.interval_in_ms"


def test_a_malformed_table_option_is_one_line_naming_it() -> None:
    with pytest.raises(SparkWriteError) as caught:
        table_settings({}, {BEAT: "soon"})
    message = str(caught.value)
    assert "\n" not in message and BEAT in message and "'soon'" in message
    with pytest.raises(SparkWriteError) as policy:
        table_settings({}, {"hoodie.cleaner.policy.failed.writes": "sometimes"})
    assert "\n" not in str(policy.value)
    assert table_settings({}, {BEAT: "250"}).heartbeat_interval_ms == 250


def test_a_refusal_in_a_data_source_worker_is_reported_without_traceback(
    monkeypatch: Any,
) -> None:
    monkeypatch.setenv(HIDE_TRACEBACK, "")  # restored (absent) after the test
    monkeypatch.delenv(HIDE_TRACEBACK)
    with pytest.raises(ValueError), one_line_refusals():  # not a refusal: traceback kept
        raise ValueError("a bug")
    with pytest.raises(SparkWriteError), one_line_refusals():  # not in a worker: untouched
        raise SparkWriteError("refused")
    assert HIDE_TRACEBACK not in os.environ
    worker = "pyspark.sql.worker.write_into_data_source"
    monkeypatch.setitem(sys.modules, worker, types.ModuleType(worker))
    with pytest.raises(ValueError), one_line_refusals():
        raise ValueError("a bug")
    assert HIDE_TRACEBACK not in os.environ
    with pytest.raises(SparkWriteError), one_line_refusals():
        raise SparkWriteError("refused")
    assert os.environ[HIDE_TRACEBACK] == "1"
