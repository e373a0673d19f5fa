"""A repository shaped like the demo's (`flowledger demo`), without Spark: the pipeline's own
`Recorder` lands five small CSVs (RECEIVE), cleans four of them (CONTENT_MODIFIED), joins them
(JOIN), splits per carrier (FORK) and writes curated files (FORK/JOIN + SEND), with content."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from flowledger.pipeline.record import Recorder
from flowledger.pipeline.sources import RawFile
from flowledger.spark.commit_info import CommitInfo, OutputFile, SparkJobInfo
from provenance.session import FlowRepository

DATASETS = ("flights", "weather", "airports", "planes", "airlines")


@dataclass(frozen=True)
class DemoRepo:
    landed: dict[str, str]  # dataset -> FlowFile UUID of its RECEIVE
    curated: list[str]  # FlowFile UUIDs of the curated files (each ends in a SEND)
    raw_uris: dict[str, str]  # dataset -> the URI its RECEIVE names


def demo_like_repo(repo: str, scratch: Path, carriers: tuple[str, ...] = ("AA", "UA")) -> DemoRepo:
    scratch.mkdir(parents=True, exist_ok=True)
    raw: list[tuple[RawFile, bytes]] = []
    for name in DATASETS:
        path = scratch / f"{name}.csv"
        data = f"id,{name}\n1,a\n2,b\n".encode()
        path.write_bytes(data)
        raw.append((RawFile(name, path), data))
    files: dict[str, bytes] = {}

    def commit(table: str, names: list[str]) -> CommitInfo:
        outs = []
        for n in names:
            uri = f"file:///lake/{table}/{n}.parquet"
            files[uri] = f"parquet bytes of {table}/{n}".encode()
            outs.append(OutputFile(uri, 2, len(files[uri])))
        job = SparkJobInfo("app-1", "demo", f"write {table}")
        return CommitInfo(f"file:///lake/{table}", "20261125200533000", "commit", "insert",
                          tuple(outs), job)  # fmt: skip

    with FlowRepository.open(repo) as flow:
        rec = Recorder(flow, "run-1")
        landed = rec.land(raw)
        tables = {n: pa.table({"id": [1, 2]}) for n in DATASETS[:4]}
        cleaned = rec.cleaned(landed, tables)
        landed.update(cleaned)
        joined = rec.joined([landed[n] for n in DATASETS[:4]], 2, "flights_enriched")
        by_carrier = rec.split(joined, {c: 1 for c in carriers})
        curated = rec.sent(joined, commit("flights_enriched", ["part-0"]), files.__getitem__)
        curated += rec.sent(
            [*by_carrier.values(), landed["airlines"]],
            commit("delays_by_carrier", ["part-0"]),
            files.__getitem__,
            "write_delays_by_carrier",
        )
    return DemoRepo(
        {n: ff.uuid for n, ff in landed.items()},
        [ff.uuid for ff in curated],
        {f.name: f.uri for f, _ in raw},
    )
