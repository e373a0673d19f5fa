"""The keyed-table life test with writes through each Spark writer: the life test's machine
(tests/support/keyed_life.py) on copy-on-write and merge-on-read tables, whose upsert and
delete rules also write through the data source (`flowledger.spark.save`) and the native
writer (`flowledger.spark.write`), interleaved with every Python write and table service and
checked against the reference model after every step (on merge-on-read tables Spark's
writes are delta commits, docs/spark.md).

Budget: FLOWLEDGER_LIFE_SPARK_EXAMPLES tables (default 4) of FLOWLEDGER_LIFE_SPARK_STEPS steps
(default 16); a Spark write costs seconds, a Python step milliseconds.
"""

from __future__ import annotations

import os
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize, rule, run_state_machine_as_test

import flowledger.spark as fs
from tests.support.keyed_life import FIGURES, KeyedLife, machine
from tests.support.life_budget import report_figures
from tests.support.life_config import CONFIGS, LifeConfig, Row, rows_strategy
from tests.support.life_stores import LocalStores

pytestmark = pytest.mark.spark

EXAMPLES = int(os.environ.get("FLOWLEDGER_LIFE_SPARK_EXAMPLES", "4"))
STEPS = int(os.environ.get("FLOWLEDGER_LIFE_SPARK_STEPS", "16"))
WRITERS = st.sampled_from(["python", "datasource", "native"])
COLUMNS = ("id", "ts", "p", "v")
ROW_SCHEMA = "id long, ts long, p string, v string"


def _configs(table_type: str) -> Any:
    mor = table_type == "merge_on_read"
    return CONFIGS.map(
        lambda c: replace(
            c, table_type=table_type, compaction_mode=c.compaction_mode if mor else "off"
        )
    )


def spark_life(spark: Any, table_type: str) -> type[KeyedLife]:
    base = machine(LocalStores(), table_type)
    configs = _configs(table_type)

    class SparkLife(base):  # type: ignore[misc, valid-type]
        def _spark(self, op: str, df: Any, writer: str) -> Any:
            put = fs.write if writer == "native" else fs.save
            info = put(df, self.table.uri, options={"operation": op})
            return SimpleNamespace(time=info.instant_time)

        # Every life starts with an upsert through each Spark writer, so both always run.
        @initialize(cfg=configs, first=rows_strategy(), second=rows_strategy())
        def create(self, cfg: LifeConfig, first: list[Row], second: list[Row]) -> None:
            self.create_table(cfg)
            self.upsert(first, "datasource")
            self.upsert(second, "native")

        # The Python upsert and delete rules, each also taken by a Spark writer (hypothesis
        # draws rules evenly: rules of their own would rarely run in a short life).
        @rule(rows=rows_strategy(), writer=WRITERS)
        def upsert(self, rows: list[Row], writer: str) -> None:
            if writer == "python":
                KeyedLife.upsert(self, rows)
                return
            df = spark.createDataFrame([tuple(r[c] for c in COLUMNS) for r in rows], ROW_SCHEMA)
            self._write(
                f"spark upsert ({writer})",
                lambda: self.model.upsert(rows),
                lambda _t: self._spark("upsert", df, writer),
            )

        @rule(rows=rows_strategy(), writer=WRITERS)
        def delete_keys(self, rows: list[Row], writer: str) -> None:
            if writer == "python":
                KeyedLife.delete_keys(self, rows, False)
                return
            keys = spark.createDataFrame([(r["id"], r["p"]) for r in rows], "id long, p string")
            self._write(
                f"spark delete ({writer})",
                lambda: self.model.delete(rows, has_ordering=False),
                lambda _t: self._spark("delete", keys, writer),
            )

    SparkLife.__name__ = SparkLife.__qualname__ = "KeyedLife_spark"
    return SparkLife


@pytest.mark.parametrize("table_type", ["copy_on_write", "merge_on_read"])
def test_keyed_table_life_with_spark_writers(spark: Any, table_type: str) -> None:
    before = FIGURES.copy()
    try:
        run_state_machine_as_test(
            spark_life(spark, table_type),
            settings=settings(
                derandomize=True,
                max_examples=EXAMPLES,
                stateful_step_count=STEPS,
                deadline=None,
                print_blob=True,
                phases=[Phase.explicit, Phase.reuse, Phase.generate],
                suppress_health_check=list(HealthCheck),
            ),
        )
    finally:
        report_figures("spark", FIGURES - before)
    spark_steps = sum(n for k, n in FIGURES.items() if k.startswith("spark ")) - sum(
        n for k, n in before.items() if k.startswith("spark ")
    )
    assert spark_steps > 0, "no step wrote through Spark"
