"""The OpenLineage run event both provenance-page test files post: one Spark job's COMPLETE,
named by its job, with one raw input and one output."""

from __future__ import annotations

import uuid

RUN = str(uuid.uuid4())
RUN_EVENT = {
    "eventType": "COMPLETE",
    "eventTime": "2026-11-23T10:00:02Z",
    "producer": "https://github.com/OpenLineage/OpenLineage/tree/1.53.0/integration/spark",
    "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
    "run": {"runId": RUN},
    "job": {"namespace": "spark", "name": "etl.write_orders"},
    "inputs": [{"namespace": "s3://raw", "name": "orders/0.csv"}],
    "outputs": [{"namespace": "file", "name": "/warehouse/orders"}],
}
