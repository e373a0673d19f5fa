"""`GET /tables/{name}/check` and `POST /tables/{name}/check/repair`: `flowledger table check`
for the repository's tables by name, over real HTTP to a `flowledger serve` process."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from storage import open_store
from tests.support.service import Client, ServiceProcess
from timeline import Table, TableSettings
from timeline.keyed import KeyedProperties, build_index

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("svc") / "repo"


@pytest.fixture(scope="module")
def server(repo: Path) -> Iterator[ServiceProcess]:
    settings = TableSettings(local_entry_cache=False, parquet_max_file_size=3000)
    for name in ("indexed", "broken"):
        t = Table.create(
            open_store(str(repo / "tables" / name)), KeyedProperties.of("id"), settings
        )
        t.upsert(pa.table({"id": list(range(200)), "v": ["x"] * 200}))
    proc = ServiceProcess(str(repo))
    yield proc
    proc.stop()


@pytest.fixture
def api(server: ServiceProcess) -> Client:
    return server.client


def test_a_sound_table_and_an_unknown_name(api: Client) -> None:
    r = api.get("/tables/indexed/check")
    assert r.status == 200, r.json()
    assert r.json()["ok"] is True and r.json()["problems"] == []
    assert api.get("/tables/nope/check").status == 404
    assert api.get("/tables/..%2Fx/check").status in (403, 404)


def test_a_missing_file_is_named_and_its_repair_refused(api: Client, repo: Path) -> None:
    t = Table.open(open_store(str(repo / "tables" / "broken")))
    gone = t.snapshot().files[0]
    (repo / "tables" / "broken" / gone.path).unlink()
    doc = api.get("/tables/broken/check").json()
    assert doc["ok"] is False
    assert [p["kind"] for p in doc["problems"]] == ["missing"]
    assert gone.path in doc["problems"][0]["subject"]
    repaired = api.post("/tables/broken/check/repair").json()
    assert repaired["ok"] is False and repaired["repairs"][0]["done"] is False


def test_a_damaged_record_index_is_rebuilt_over_http(api: Client, repo: Path) -> None:
    root = repo / "tables" / "indexed"
    t = Table.open(open_store(str(root)))
    built = build_index(t)
    shard = t.entry(built.time).metadata["record_index"]["shards"][0]["path"]
    (root / shard).write_bytes(b"not a shard")
    doc = api.get("/tables/indexed/check").json()
    assert [p["kind"] for p in doc["problems"]] == ["record_index"]
    repaired = api.post("/tables/indexed/check/repair").json()
    assert repaired["ok"] is True and repaired["repairs"][0]["done"] is True
    assert api.get("/tables/indexed/check").json()["ok"] is True
