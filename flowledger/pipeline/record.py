"""The pipeline's own provenance: one process session per stage (see docs/pipeline.md).

RECEIVE (raw CSV landed) → CONTENT_MODIFIED (typed and cleaned, content = Parquet) → JOIN
(flights + weather + airports + planes = flights_enriched) → FORK (one FlowFile per carrier,
and one per curated data file) → SEND (each curated data file, content = the file's bytes).
A curated file's FlowFile UUID is uuid5(URL namespace, canonical file URI) and its SEND's
transit URI is the file's URI as Spark names it: the key shared with the Spark provenance hook
and with the slices of later keyed commits (docs/pipeline.md).
"""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from provenance.session import FlowFile, FlowRepository

from ..slice_provenance import slice_uuid
from ..spark import CommitInfo
from .sources import RawFile

COMPONENT_TYPE = "flowledger.pipeline"


def file_uuid(uri: str) -> str:
    """The FlowFile UUID of a curated data file (deterministic: one per file, whatever the
    spelling of its URI): the FlowFile of its file slice, which a later keyed commit names
    as the slice it replaced (flowledger.slice_provenance)."""
    return slice_uuid(uri)


def parquet_bytes(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="zstd")
    return buf.getvalue()


class Recorder:
    """Records each stage through a session on `flow`."""

    def __init__(self, flow: FlowRepository, run_id: str) -> None:
        self.flow = flow
        self.run_id = run_id

    def land(self, raw: Sequence[tuple[RawFile, bytes]]) -> dict[str, FlowFile]:
        """Each raw CSV becomes a FlowFile with the file's bytes (RECEIVE)."""
        out: dict[str, FlowFile] = {}
        with self.flow.session("pipeline.land", COMPONENT_TYPE) as s:
            for f, data in raw:
                ff = s.create(
                    attributes={
                        "filename": f.filename,
                        "mime.type": "text/csv",
                        "dataset": f.name,
                        "pipeline.run": self.run_id,
                    }
                )
                ff = s.import_from(data, ff)
                s.receive(ff, f.uri, details=f"landed {f.filename} ({len(data):,} bytes)")
                out[f.name] = ff
        return out

    def cleaned(
        self, raw: Mapping[str, FlowFile], tables: Mapping[str, pa.Table]
    ) -> dict[str, FlowFile]:
        """Each input's content replaced by its typed, cleaned Parquet (CONTENT_MODIFIED)."""
        out: dict[str, FlowFile] = {}
        with self.flow.session("pipeline.type_and_clean", COMPONENT_TYPE) as s:
            for name, table in tables.items():
                ff = s.write(raw[name], parquet_bytes(table))
                out[name] = s.put_all_attributes(
                    ff,
                    {
                        "filename": f"{name}.parquet",
                        "mime.type": "application/vnd.apache.parquet",
                        "record.count": str(table.num_rows),
                    },
                )
        return out

    def joined(self, parents: Sequence[FlowFile], rows: int, table: str) -> FlowFile:
        """The enriched dataset: one FlowFile joined from its inputs (JOIN)."""
        with self.flow.session("pipeline.join", COMPONENT_TYPE) as s:
            child = s.create(
                list(parents),
                attributes={"filename": table, "dataset": table, "record.count": str(rows)},
            )
        return child

    def split(self, parent: FlowFile, counts: Mapping[str, int]) -> dict[str, FlowFile]:
        """One child per carrier (FORK), each with its row count."""
        out: dict[str, FlowFile] = {}
        with self.flow.session("pipeline.split_by_carrier", COMPONENT_TYPE) as s:
            for carrier, rows in sorted(counts.items()):
                out[carrier] = s.create(
                    parent,
                    attributes={
                        "filename": f"{parent.attributes.get('filename')}-{carrier}",
                        "carrier": carrier,
                        "record.count": str(rows),
                    },
                )
        return out

    def sent(
        self,
        parents: FlowFile | Sequence[FlowFile],
        commit: CommitInfo,
        read: Callable[[str], bytes],
        component: str = "write",
    ) -> list[FlowFile]:
        """One FlowFile per data file the commit wrote (FORK from one parent, JOIN from
        several), holding the file's bytes, and its SEND to the file's URI."""
        out: list[FlowFile] = []
        with self.flow.session(f"pipeline.{component}", COMPONENT_TYPE) as s:
            for f in commit.files:
                ff = s.create(
                    parents,
                    uuid=file_uuid(f.uri),
                    attributes={
                        "filename": f.uri.rsplit("/", 1)[-1],
                        "file.uri": f.uri,
                        "table": commit.table_uri,
                        "instant.time": commit.instant_time,
                        "partition": f.partition,
                        "record.count": str(f.rows),
                    },
                )
                ff = s.write(ff, read(f.uri))
                s.send(ff, f.uri, details=f"{commit.action} {commit.instant_time}")
                out.append(ff)
        return out
