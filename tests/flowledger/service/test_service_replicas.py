"""Stateless replicas: two `flowledger serve` processes on one MinIO repository answer the
same queries the same way while one of them ingests."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from tests.support.servers import S3Endpoint
from tests.support.service import ServiceProcess

pytestmark = pytest.mark.minio


def _batch(i: int) -> bytes:
    return "\n".join(
        json.dumps(
            {
                "event_type": "CREATE",
                "flowfile_uuid": f"r-{i}-{j}",
                "component_id": f"gen-{i % 3}",
                "component_type": "GenerateFlowFile",
                "file_size": j,
            }
        )
        for j in range(20)
    ).encode()


def test_two_replicas_agree_while_one_ingests(minio: S3Endpoint, tmp_path: Path) -> None:
    bucket = minio.new_bucket()
    env = {
        "AWS_ENDPOINT_URL": minio.endpoint,
        "AWS_ACCESS_KEY_ID": minio.access_key,
        "AWS_SECRET_ACCESS_KEY": minio.secret_key,
        "AWS_REGION": minio.region,
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    repo = f"s3://{bucket}/fl"
    a = ServiceProcess(repo, env)
    b = ServiceProcess(repo, {**env, "XDG_CACHE_HOME": str(tmp_path / "cache-b")})
    try:
        assert a.client.post("/provenance/events", raw=_batch(0)).status == 201
        stop = threading.Event()
        errors: list[str] = []

        def ingest() -> None:
            i = 1
            while not stop.is_set() and i < 40:
                r = a.client.post("/provenance/events", raw=_batch(i))
                if r.status != 201:
                    errors.append(f"{r.status} {r.body[:200]!r}")
                i += 1

        writer = threading.Thread(target=ingest)
        writer.start()
        try:
            for round_ in range(5):
                # A query submitted on one replica polls the same on the other (its id
                # carries the request and the snapshot bound).
                body = {
                    "provenance": {"request": {"searchTerms": {"ComponentID": {"value": "gen-0"}}}}
                }
                sub = a.client.post("/nifi-api/provenance", body)
                assert sub.status == 201, sub.body
                entity = sub.json()["provenance"]
                polled = b.client.get(entity["uri"])
                assert polled.status == 200, polled.body
                ids_a = [e["eventId"] for e in entity["results"]["provenanceEvents"]]
                ids_b = [
                    e["eventId"] for e in polled.json()["provenance"]["results"]["provenanceEvents"]
                ]
                assert ids_a == ids_b and ids_a, round_
                # A committed event looks the same from both.
                ev_a = a.client.get(f"/nifi-api/provenance-events/{ids_a[-1]}").json()
                ev_b = b.client.get(f"/nifi-api/provenance-events/{ids_a[-1]}").json()
                assert ev_a == ev_b
                # SQL bounded to what both have seen agrees.
                bound = max(ids_a)
                sql = {
                    "sql": "SELECT count(*), sum(file_size) FROM provenance "
                    f"WHERE event_id <= {bound}"
                }
                assert a.client.post("/sql", sql).json() == b.client.post("/sql", sql).json()
        finally:
            stop.set()
            writer.join(120)
        assert errors == []
        # Once ingest is done both replicas see every event.
        sql = {"sql": "SELECT count(*) FROM provenance"}
        count_a = a.client.post("/sql", sql).json()["rows"]
        assert count_a == b.client.post("/sql", sql).json()["rows"]
        assert count_a[0][0] % 20 == 0 and count_a[0][0] >= 40
    finally:
        a.stop()
        b.stop()
