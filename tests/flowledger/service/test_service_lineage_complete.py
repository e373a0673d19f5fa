"""Lineage never dead-ends: every file a keyed merge-on-read table leaves current after a first
write, a later correction (delta commit of log files) and a compaction walks back to the raw
inputs by NiFi's lineage requests (FLOWFILE, then PARENTS on every event that names parents),
through the HTTP API of a real `flowledger serve` and through NiFi's own client, nipyapi."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.keyed_lineage import CORRECTION, FIRST, Lake, compacted_lake
from tests.support.lineage_walk import all_ancestors, over_http, with_nipyapi
from tests.support.service import ServiceProcess

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServiceProcess, Lake]]:
    shape = compacted_lake(tmp_path_factory.mktemp("lineage"))
    proc = ServiceProcess(shape.repo)
    yield proc, shape
    proc.stop()


def test_every_current_file_reaches_the_raw_inputs_over_http(
    lake: tuple[ServiceProcess, Lake],
) -> None:
    server, shape = lake
    submit, event = over_http(server)
    for uuid in shape.current:
        assert all_ancestors(submit, event, uuid) == {*FIRST, *CORRECTION}


def test_every_current_file_reaches_the_raw_inputs_with_nipyapi(
    lake: tuple[ServiceProcess, Lake],
) -> None:
    server, shape = lake
    submit, event = with_nipyapi(server)
    for uuid in shape.current:
        assert all_ancestors(submit, event, uuid) == {*FIRST, *CORRECTION}
