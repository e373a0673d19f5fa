"""Log files of merge-on-read tables: one immutable object per (delta commit, file group,
block), an Arrow IPC stream sealed with a checksum trailer.

A block holds the records a delta commit changed in one file group: upserted rows whole
(meta columns included) and deleted records as their key, ordering value and commit time,
told apart by the `_flowledger_op` column (`U` / `D`). The stream's schema metadata carries
the block's header: format, instant, file group and block number. A reader verifies the
checksum the commit recorded and the trailer before decoding a byte, then checks the header
against the commit that names the file: a block copied under another instant or file group
is refused.

Arrow IPC rather than Parquet: a block is small and read whole, right after its footer-less
stream header, with no page decoding; zstd buffer compression keeps it about as small as a
Parquet file of the same rows for the few columns a delta usually carries.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.ipc as ipc

from storage import IntegrityError, ObjectStore, checksum_of, open_blob, seal_blob, verify

from ..errors import TimelineError

LOG_FORMAT = "flowledger.log-block/1"
OP_COL = "_flowledger_op"
UPSERT = "U"
DELETE = "D"
LOG_FILES = "log_files"  # the commit-metadata field listing a delta commit's log files
_HEADER = b"flowledger.log"


@dataclass(frozen=True)
class LogFile:
    """One log file as its delta commit records it."""

    path: str
    file_group: str
    partition: str
    instant: str
    block: int
    size: int
    rows: int
    checksum: str
    upserts: int = 0
    deletes: int = 0

    @property
    def block_id(self) -> tuple[str, str, int]:
        """What names a block: a task retried under another file name writes the same id,
        and readers keep one block per id."""
        return (self.instant, self.file_group, self.block)

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "file_group": self.file_group,
            "partition": self.partition,
            "instant": self.instant,
            "block": self.block,
            "size": self.size,
            "rows": self.rows,
            "checksum": self.checksum,
            "upserts": self.upserts,
            "deletes": self.deletes,
        }

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> LogFile:
        return LogFile(
            str(d["path"]),
            str(d["file_group"]),
            str(d.get("partition", "")),
            str(d["instant"]),
            int(d.get("block", 0)),
            int(d.get("size", 0)),
            int(d.get("rows", 0)),
            str(d.get("checksum", "")),
            int(d.get("upserts", 0)),
            int(d.get("deletes", 0)),
        )


def log_name(file_group: str, instant: str, block: int = 0) -> str:
    """Hudi names log files `.<fileId>_<baseInstant>.log.<version>`; ours name the delta
    commit that wrote them (rollback deletes by the instant's data prefix)."""
    return f".{file_group}_{instant}.log.{block}"


def encode_block(rows: pa.Table, instant: str, file_group: str, block: int) -> bytes:
    header = {
        "format": LOG_FORMAT,
        "instant": instant,
        "file_group": file_group,
        "block": block,
    }
    meta = dict(rows.schema.metadata or {})
    meta[_HEADER] = json.dumps(header, sort_keys=True).encode()
    rows = rows.replace_schema_metadata(meta)
    sink = pa.BufferOutputStream()
    opts = ipc.IpcWriteOptions(compression="zstd", use_threads=False)
    with ipc.new_stream(sink, rows.schema, options=opts) as w:
        w.write_table(rows)
    return seal_blob(sink.getvalue().to_pybytes())


def write_log(
    store: ObjectStore,
    key: str,
    rows: pa.Table,
    *,
    instant: str,
    file_group: str,
    partition: str,
    block: int = 0,
) -> LogFile:
    """PUT one block (immutable: a retry writes the same bytes at the same key)."""
    body = encode_block(rows, instant, file_group, block)
    store.put(key, body)
    ops = rows.column(OP_COL)
    deletes = int(pa.compute.sum(pa.compute.equal(ops, DELETE)).as_py() or 0)
    return LogFile(
        key,
        file_group,
        partition,
        instant,
        block,
        len(body),
        rows.num_rows,
        checksum_of(body),
        rows.num_rows - deletes,
        deletes,
    )


def read_log(store: ObjectStore, log: LogFile) -> pa.Table:
    """The block's rows, verified (commit checksum, trailer, header) before they are used."""
    data = store.get(log.path)
    where = store.url(log.path)
    if log.size and len(data) != log.size:
        raise IntegrityError(
            f"{where} is corrupt: {len(data)} bytes read, the commit recorded {log.size}", where
        )
    verify(data, log.checksum, where)
    body, verified = open_blob(data, where)
    if not verified:
        raise IntegrityError(f"{where} is corrupt: its checksum trailer is missing", where)
    with ipc.open_stream(pa.BufferReader(body)) as r:
        rows = r.read_all()
    meta = rows.schema.metadata or {}
    try:
        header = json.loads(meta[_HEADER])
    except (KeyError, ValueError) as exc:
        raise IntegrityError(f"{where} has no log block header", where) from exc
    if header.get("format") != LOG_FORMAT:
        raise TimelineError(f"{where}: unsupported log format {header.get('format')!r}")
    got = (header.get("instant"), header.get("file_group"), header.get("block"))
    if got != (log.instant, log.file_group, log.block):
        raise IntegrityError(
            f"{where} holds block {got}, but its commit names {log.block_id}", where
        )
    return rows.replace_schema_metadata(None)


def logs_of(metadata: Mapping[str, Any]) -> list[LogFile]:
    """A commit's log files, one per block id (a block recorded twice is read once)."""
    seen: set[tuple[str, str, int]] = set()
    out = []
    for d in metadata.get(LOG_FILES, ()):
        lf = LogFile.from_json(d)
        if lf.block_id not in seen:
            seen.add(lf.block_id)
            out.append(lf)
    return out
