"""The life test of keyed tables: random sequences of every write operation and every table
service (tests/support/keyed_life.py), with all read paths compared with the reference model
after every step. Copy-on-write and merge-on-read each get their own budget; key scope,
merge mode, record index and compaction mode are drawn per run.

Budget: FLOWLEDGER_LIFE_EXAMPLES runs (tables) of at most FLOWLEDGER_LIFE_STEPS steps each.
`make soak` runs the same tests with a large budget and a printed seed; a failure prints the
shrunk list of steps (and `@reproduce_failure` data) to replay it.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from tests.support.keyed_life import FIGURES, machine
from tests.support.life_budget import EXAMPLES, SHRINK, SOAK, STEPS, report_figures
from tests.support.life_stores import LocalStores, MinioStores, StoreFactory
from tests.support.servers import S3Endpoint


def _settings(examples: int) -> settings:
    # `make test` runs the same examples every time (a red CI is never luck); a soak round
    # draws from its seed and keeps no example database, so the seed alone replays it.
    # `make test` does not shrink (a failure there costs seconds, not the minutes hypothesis
    # may shrink for): FLOWLEDGER_LIFE_SHRINK=1, or the soak, shrinks to the shortest steps.
    extra: dict[str, Any] = {"database": None} if SOAK else {"derandomize": True}
    if not (SOAK or SHRINK):
        extra["phases"] = [Phase.explicit, Phase.reuse, Phase.generate]
    return settings(
        **extra,
        max_examples=examples,
        stateful_step_count=STEPS,
        deadline=None,
        print_blob=True,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.filter_too_much,
            HealthCheck.function_scoped_fixture,
        ],
    )


TABLE_TYPES = ["copy_on_write", "merge_on_read"]


def _run(factory: StoreFactory, table_type: str, examples: int) -> None:
    before = FIGURES.copy()
    try:
        run_state_machine_as_test(machine(factory, table_type), settings=_settings(examples))
    finally:
        report_figures(table_type, FIGURES - before)
    assert FIGURES["steps"] > before["steps"], "the life test ran no step"


@pytest.mark.unit
@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_keyed_table_life_local(table_type: str) -> None:
    _run(LocalStores(), table_type, EXAMPLES)


@pytest.mark.minio
@pytest.mark.parametrize("table_type", TABLE_TYPES)
def test_keyed_table_life_minio(minio: S3Endpoint, table_type: str) -> None:
    _run(MinioStores(minio), table_type, max(1, EXAMPLES // 2))
