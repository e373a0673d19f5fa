"""Provenance rollover as a PySpark job (engine="spark") against MinIO."""

from __future__ import annotations

from typing import Any

import pytest

from provenance import (
    ProvenanceEvent,
    ProvenanceRepository,
    ProvenanceSettings,
    Query,
    SearchTerm,
)
from provenance.layout import JOURNALS
from storage import open_store
from tests.support.servers import S3Endpoint

pytestmark = pytest.mark.spark


def _events(start: int, n: int) -> list[ProvenanceEvent]:
    return [
        ProvenanceEvent(
            "RECEIVE", f"ff-{i}", "getter", "GetFile", 100 + i, transit_uri=f"file:///in/{i}"
        )
        for i in range(start, start + n)
    ]


def test_spark_rollover_merges_backlog_into_several_files(spark: Any, minio: S3Endpoint) -> None:
    bucket = minio.new_bucket()
    root = open_store(f"s3://{bucket}/repo", minio.settings())
    settings = ProvenanceSettings(rollover_size=20_000)  # several chunks -> several tasks
    # background=False: the writer's own rollover by size would merge the backlog first.
    with ProvenanceRepository.open(root, settings, background=False) as prov:
        for batch in range(12):
            prov.register_events(_events(batch * 250, 250), sync=True)
        assert len(list(prov.store.list(JOURNALS))) >= 12
        result = prov.rollover(engine="spark", spark=spark)
        assert result.events == 3000 and result.files >= 2
        assert list(prov.store.list(JOURNALS)) == []  # merged journals deleted
        assert prov.max_event_id() == 2999
        assert prov.sql("SELECT count(*), count(DISTINCT event_id) FROM provenance")[1] == [
            (3000, 3000)
        ]
        hits = prov.query(Query(terms=(SearchTerm("flowfile_uuid", "ff-1234"),)))
        assert [e.flowfile_uuid for e in hits] == ["ff-1234"]
        assert prov.rollover().events == 0  # nothing left for the local engine
    # A fresh process sees the same committed files.
    with ProvenanceRepository.open(open_store(f"s3://{bucket}/repo", minio.settings())) as again:
        assert len(again.snapshot().files) == result.files
        assert [e.event_id for e in again.get_events(2990, 20)] == list(range(2990, 3000))
