"""Log blocks of formats 1 to 3, each its own Arrow IPC stream sealed with a checksum
trailer: one immutable object per (delta commit, file group, block), or packed back to back
into a log object (keyed/log/objects.py). Delta commits now write log objects of format 4
(keyed/log/stream.py: one stream per object); these blocks are still read, and written
where a commit's blocks differ in columns. `read_log` reads a block of either kind.

A block holds the records a delta commit changed in one file group: upserted rows whole
(meta columns included) and deleted records as their key, ordering value and commit time,
told apart by the `_flowledger_op` column (`U` / `D`). The stream's schema metadata carries
the block's header: format, instant, file group and block number. A reader verifies the
checksum the commit recorded and the trailer before decoding a byte, then checks the header
against the commit that names the file: a block copied under another instant or file group
is refused.

What the header implies is not stored again (format 2, keyed/log/implied.py): the commit
time of every row is the block's instant, the op column is its upserts first then its
deletes (the header counts the upserts), and a record key that is the text of one key column
(a single integer or string key) is that column cast to text. Those columns are rebuilt on
decoding, and each is dropped only when the block's rows really are so; it is what keeps a
block close to the size of the changed rows themselves (docs/tables.md, "Log format").
Format 1 blocks stored every column.
Format 3 is format 2 plus the rule a reader merges the block by (keyed/read/merge.py): entries
compared by an ordering column at read time, where format 1 and 2 blocks were decided by
their writer and apply in order.

Arrow IPC rather than Parquet: a block is small and read whole, right after its footer-less
stream header, with no page decoding; zstd buffer compression keeps it about as small as a
Parquet file of the same rows. A block of few rows is stored as one zstd frame of the whole
stream instead (`FLZ1` magic, the stream's length), when that is smaller: the schema message
and buffer framing are then most of its bytes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pyarrow.ipc as ipc

from storage import IntegrityError, ObjectStore, checksum_of, open_blob, seal_blob, verify

from ...errors import TimelineError, committed_object
from ...file_groups.log_files import LogFile
from ..keys import COMMIT_TIME_COL, RECORD_KEY_COL
from .heads import Heads
from .implied import DELETE as DELETE
from .implied import OP_COL as OP_COL  # (what readers of blocks name the op column by)
from .implied import UPSERT as UPSERT
from .implied import implied_fields, rebuild_columns
from .stream import decode_block

LOG_FORMAT = "flowledger.log-block/3"
#: Format 3 is format 2's encoding with the read-time merge rule in the header and commit
#: (`merge_by`, `ordered_deletes`): an older reader, which applies blocks in order, refuses it.
_COMPACT_FORMATS = ("flowledger.log-block/2", LOG_FORMAT)
_READABLE = ("flowledger.log-block/1", *_COMPACT_FORMATS)
_HEADER = b"flowledger.log"
#: A block of a format 4 object read alone is fetched with the stream's head in one GET from
#: the object's start when it ends this near it: a request costs more than these bytes.
ONE_GET_UP_TO = 512 * 1024
#: A block is small: decompressing its few buffers on Arrow's thread pool costs more in
#: hand-offs than it saves, and a snapshot already decodes blocks on several threads.
_READ_OPTIONS = ipc.IpcReadOptions(use_threads=False)
#: A body that is one zstd frame of the whole (uncompressed) IPC stream, after this magic
#: and the stream's length (8 bytes, little-endian).
_WHOLE = b"FLZ1"


def log_name(file_group: str, instant: str, block: int = 0) -> str:
    """Hudi names log files `.<fileId>_<baseInstant>.log.<version>`; ours name the delta
    commit that wrote them (rollback deletes by the instant's data prefix)."""
    return f".{file_group}_{instant}.log.{block}"


def encode_block(
    rows: pa.Table,
    instant: str,
    file_group: str,
    block: int,
    key_from: str | None = None,
    merge_by: str = "",
    ordered_deletes: bool = False,
) -> bytes:
    """One block's bytes; `key_from`: the single record key column, if there is one;
    `merge_by`, `ordered_deletes`: its read-time merge rule (LogFile)."""
    header = {
        "format": LOG_FORMAT,
        "instant": instant,
        "file_group": file_group,
        "block": block,
        **({"merge_by": merge_by, "ordered_deletes": ordered_deletes} if merge_by else {}),
        **implied_fields(rows, instant, key_from),
    }
    implied = {
        COMMIT_TIME_COL: "commit_time" in header,
        OP_COL: "upserts" in header,
        RECORD_KEY_COL: "record_key_from" in header,
    }
    rows = rows.drop_columns([c for c, gone in implied.items() if gone])
    meta = dict(rows.schema.metadata or {})
    meta[_HEADER] = json.dumps(header, sort_keys=True).encode()
    rows = rows.replace_schema_metadata(meta)
    return seal_blob(min(_ipc(rows, "zstd"), _whole(_ipc(rows, None)), key=len))


def _ipc(rows: pa.Table, compression: str | None) -> bytes:
    sink = pa.BufferOutputStream()
    opts = ipc.IpcWriteOptions(compression=compression, use_threads=False)
    with ipc.new_stream(sink, rows.schema, options=opts) as w:
        w.write_table(rows)
    return bytes(sink.getvalue().to_pybytes())


def _whole(stream: bytes) -> bytes:
    """A stream compressed as one zstd frame: smaller than per-buffer compression for a
    block of a few rows, where the schema message and buffer framing dominate."""
    frame = pa.Codec("zstd").compress(stream, asbytes=True)
    return _WHOLE + len(stream).to_bytes(8, "little") + bytes(frame)


def _rebuild(rows: pa.Table, header: Mapping[str, Any]) -> pa.Table:
    """The block's rows with the columns its header implies put back, in written order."""
    if header.get("format") not in _COMPACT_FORMATS:
        return rows  # format 1 stored every column
    if "upserts" in header:
        n, u = rows.num_rows, int(header["upserts"])
        # The op values are made here, not at import: pyarrow's first scalar imports pandas
        # (0.3-0.4 s), which every process importing timeline would pay.
        upsert, delete = pa.scalar(UPSERT, pa.string()), pa.scalar(DELETE, pa.string())
        ops = pa.concat_arrays([pa.repeat(upsert, u), pa.repeat(delete, n - u)])
        rows = rows.append_column(OP_COL, ops)
    return rebuild_columns(rows, header)


def write_log(
    store: ObjectStore,
    key: str,
    rows: pa.Table,
    *,
    instant: str,
    file_group: str,
    partition: str,
    block: int = 0,
    key_from: str | None = None,
    merge_by: str = "",
    ordered_deletes: bool = False,
    key_stats: Mapping[str, Any] | None = None,
) -> LogFile:
    """PUT one block (immutable: a retry writes the same bytes at the same key);
    `key_from`: the table's record key column when it has exactly one; `merge_by`,
    `ordered_deletes`, `key_stats`: recorded with it (LogFile)."""
    body = encode_block(rows, instant, file_group, block, key_from, merge_by, ordered_deletes)
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
        merge_by,
        ordered_deletes and bool(merge_by),
        dict(key_stats or {}),
    )


def read_log(store: ObjectStore, log: LogFile, heads: Heads | None = None) -> pa.Table:
    """The block's rows, verified (commit checksum, trailer, header) before they are used:
    the whole object, or the block's byte range of an object holding several (of a
    format 4 object: the stream's head, then the block's range; `heads`: the heads this
    reader read before, not fetched again)."""
    whole, where = log.offset is None, store.url(log.path)
    if log.head:
        return _read_streamed(store, log, where, heads)
    with committed_object(where):
        data = store.get(log.path) if whole else store.get(log.path, log.offset or 0, log.size)
    return decode_log(data, log, where)


def _read_streamed(store: ObjectStore, log: LogFile, where: str, heads: Heads | None) -> pa.Table:
    """A block of a format 4 object: the stream's head and the block's range, in one GET
    from the object's start when the block ends within `ONE_GET_UP_TO` bytes of it. A head
    in `heads` (keyed/log/heads.py) is not fetched again: the block's range alone."""
    at = log.offset or 0
    keep = heads if log.object_checksum else None  # (an object's heads go by its checksum)
    known = keep.get(where, log.object_checksum) if keep is not None else None
    with committed_object(where):
        if known is not None:
            head, block = known, memoryview(store.get(log.path, at, log.size))
        elif at + log.size <= ONE_GET_UP_TO:
            data = store.get(log.path, 0, at + log.size)
            head, block = data[: log.head], memoryview(data)[at:]
        else:
            head = store.get(log.path, 0, log.head)
            block = memoryview(store.get(log.path, at, log.size))
    rows = decode_block(head, block, log, where)
    if keep is not None and known is None:
        keep.put(where, log.object_checksum, bytes(head))  # verified with the block
    return rows


def decode_log(data: bytes | memoryview, log: LogFile, where: str) -> pa.Table:
    """The rows of the block `data` (its bytes alone), verified before decoding."""
    if log.size and len(data) != log.size:
        raise IntegrityError(
            f"{where} is corrupt: {len(data)} bytes read, the commit recorded {log.size}"
            + (f" at offset {log.offset}" if log.offset is not None else ""),
            where,
        )
    verify(data, log.checksum, where)
    body, verified = open_blob(bytes(data) if isinstance(data, memoryview) else data, where)
    if not verified:
        raise IntegrityError(f"{where} is corrupt: its checksum trailer is missing", where)
    if bytes(body[:4]) == _WHOLE:
        size = int.from_bytes(bytes(body[4:12]), "little")
        body = pa.Codec("zstd").decompress(bytes(body[12:]), decompressed_size=size)
    with ipc.open_stream(pa.BufferReader(body), options=_READ_OPTIONS) as r:
        rows = r.read_all()
    meta = rows.schema.metadata or {}
    try:
        header = json.loads(meta[_HEADER])
    except (KeyError, ValueError) as exc:
        raise IntegrityError(f"{where} has no log block header", where) from exc
    if header.get("format") not in _READABLE:
        raise TimelineError(f"{where}: unsupported log format {header.get('format')!r}")
    got = (header.get("instant"), header.get("file_group"), header.get("block"))
    if got != (log.instant, log.file_group, log.block):
        raise IntegrityError(
            f"{where} holds block {got}, but its commit names {log.block_id}", where
        )
    return _rebuild(rows.replace_schema_metadata(None), header)
