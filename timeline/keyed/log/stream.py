"""Log objects of format 4: the blocks one delta commit writes into one partition as the
record batches of **one** Arrow IPC stream.

The object starts with the stream's schema message (the *head*), whose metadata carries what
every block of the object shares: the format, the instant, the read-time merge rule and which
columns the header implies (format 2's rules, applied to the object: a column is left out
only when every block's rows agree with it). Each block is then one record batch message,
whose custom metadata is the block's own header: file group, block number and, when its op
column is implied, its upsert count. The stream is written uncompressed and each batch
message is stored as one zstd frame (after its length and the frame's, 4 bytes each): one
decompression per block, where Arrow's buffer compression makes one per column buffer, and
for the few rows of a block about as small (format 3 stored its small blocks the same way,
the whole stream in one frame).

A reader of the whole object verifies the object's checksum before using a byte, then
decompresses the blocks it wants and decodes them as one stream: one schema, one stream
open, the implied columns rebuilt once for all of them, each block a slice of the result.
The frames are decompressed through one zstd context per decoding (python-zstandard), not
Arrow's codec, which sets a context up per call: 22 us against 9 for a block of 4 KiB (a
snapshot after 20 delta commits decompresses thousands of blocks). Format 3 packed one
sealed stream per block, each decoded on its own (a schema message, a stream open, a rebuild
and a dozen small zstd frames per block: most of a snapshot's log time).

The commit records per block its `offset` and `size` in the object, the head's length
(`head`, which marks the format) and the checksum of the head's bytes followed by the
block's, so a reader of one file group GETs the head and the block's range (two ranged
GETs), verifies both and decodes the block alone. Either way a block whose header does not
name the instant, file group and block number of the commit's record of it is refused.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc
import zstandard

from storage import IntegrityError, checksum_of, verify

from ...errors import TimelineError
from ...file_groups.log_files import LogFile
from ..keys import COMMIT_TIME_COL, RECORD_KEY_COL
from .implied import OP_COL, implied_fields, rebuild_columns

OBJECT_FORMAT = "flowledger.log-object/4"
_HEADER = b"flowledger.log"
_BLOCK = b"flowledger.block"
_READ_OPTIONS = ipc.IpcReadOptions(use_threads=False)
#: The stream is written uncompressed; each block's record batch message is stored as one
#: zstd frame (`_frame`): a block is small, and one frame per block decompresses in one call
#: where Arrow's buffer compression made one per column buffer.
_WRITE_OPTIONS = ipc.IpcWriteOptions(use_threads=False)
_ZSTD = pa.Codec("zstd")
#: The end-of-stream marker a stream of one block read by range is closed with.
_EOS = b"\xff\xff\xff\xff\x00\x00\x00\x00"


@dataclass(frozen=True)
class Encoded:
    """An object's bytes and, per block in the order given, (offset, size, checksum)."""

    body: bytes
    head: int
    blocks: list[tuple[int, int, str]]


def shares_schema(parts: Sequence[pa.Table]) -> bool:
    """Whether `parts` can be batches of one stream (the same columns and types)."""
    first = parts[0].schema.remove_metadata()
    return all(p.schema.remove_metadata().equals(first) for p in parts[1:])


def encode_object(
    parts: Sequence[tuple[str, pa.Table]],
    instant: str,
    *,
    key_from: str | None = None,
    merge_by: str = "",
    ordered_deletes: bool = False,
) -> Encoded:
    """`parts` ((file group, rows with the op column), one schema) as one stream: deterministic,
    so a retried write PUTs the same bytes."""
    each = [implied_fields(rows, instant, key_from) for _, rows in parts]
    header: dict[str, Any] = {
        "format": OBJECT_FORMAT,
        "instant": instant,
        **({"merge_by": merge_by, "ordered_deletes": ordered_deletes} if merge_by else {}),
    }
    for name in ("commit_time", "record_key_from", "columns"):
        values = {json.dumps(e.get(name)) for e in each}
        if len(values) == 1 and each[0].get(name) is not None:
            header[name] = each[0][name]
    ops = all("upserts" in e for e in each)
    gone = [
        c
        for c, on in (
            (COMMIT_TIME_COL, "commit_time" in header),
            (RECORD_KEY_COL, "record_key_from" in header),
            (OP_COL, ops),
        )
        if on
    ]
    if "columns" not in header and any("columns" in e for e in each):
        header["columns"] = parts[0][1].column_names
    schema = (
        parts[0][1]
        .drop_columns(gone)
        .schema.with_metadata({_HEADER: json.dumps(header, sort_keys=True).encode()})
    )
    head = schema.serialize().to_pybytes()
    sink = pa.BufferOutputStream()
    starts: list[int] = []
    with ipc.new_stream(sink, schema, options=_WRITE_OPTIONS) as w:
        for (group, rows), e in zip(parts, each, strict=True):
            starts.append(sink.tell() if starts else len(head))
            own = {"file_group": group, "block": 0, **({"upserts": e["upserts"]} if ops else {})}
            body = rows.drop_columns(gone).replace_schema_metadata(schema.metadata)
            for batch in body.combine_chunks().to_batches() or [_empty(schema)]:
                w.write_batch(batch, custom_metadata={_BLOCK: json.dumps(own, sort_keys=True)})
        starts.append(sink.tell())
    raw = sink.getvalue().to_pybytes()
    if not raw.startswith(head):
        raise TimelineError("an Arrow IPC stream did not start with its schema message")
    out, blocks = [head], []
    at = len(head)
    for a, b in itertools.pairwise(starts):
        framed = _frame(raw[a:b])
        blocks.append((at, len(framed), checksum_of(head + framed)))
        out.append(framed)
        at += len(framed)
    return Encoded(b"".join(out), len(head), blocks)


def _frame(message: bytes) -> bytes:
    """A record batch message as stored: its length and its compressed length (4 bytes
    each, little-endian), then one zstd frame of it."""
    frame = bytes(_ZSTD.compress(message, asbytes=True))
    if len(message) >= 1 << 32:
        raise TimelineError(f"a log block of {len(message)} bytes is over the format's 4 GiB")
    return len(message).to_bytes(4, "little") + len(frame).to_bytes(4, "little") + frame


def _unframe(framed: bytes | memoryview, where: str, dctx: zstandard.ZstdDecompressor) -> bytes:
    """A stored block's record batch message. `dctx`: one decompression context for all the
    blocks of a decoding (a context is not thread-safe; Arrow's codec sets one up per call,
    more than half of the time a small block's decompression takes)."""
    raw = int.from_bytes(bytes(framed[:4]), "little")
    size = int.from_bytes(bytes(framed[4:8]), "little")
    if size != len(framed) - 8:
        raise IntegrityError(f"{where} is corrupt: a block's frame length does not match", where)
    try:
        out = dctx.decompress(framed[8:], max_output_size=raw)
    except zstandard.ZstdError as exc:
        msg = f"{where} is corrupt: a block does not decompress ({exc})"
        raise IntegrityError(msg, where) from exc
    if len(out) != raw:
        raise IntegrityError(f"{where} is corrupt: a block's length does not match", where)
    return out


def _empty(schema: pa.Schema) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([], schema=schema)


def decode_object(data: bytes, logs: Sequence[LogFile], where: str) -> dict[str, pa.Table]:
    """The blocks `logs` of the object `data` (whose checksum the caller verified) by
    `LogFile.ref`: each block's frame decompressed, then one stream of them all decoded,
    the implied columns rebuilt once for all of them, each block a slice of the result."""
    view = memoryview(data)
    order = sorted(logs, key=lambda lf: lf.offset or 0)
    head = logs[0].head
    framed = [view[lf.offset or 0 : (lf.offset or 0) + lf.size] for lf in order]
    return _decode(view[:head], framed, order, where)


def decode_block(head: bytes, block: bytes | memoryview, lf: LogFile, where: str) -> pa.Table:
    """One block read by range: the object's `head` bytes and the block's, verified against
    the checksum its commit recorded before they are decoded."""
    if len(head) != lf.head or len(block) != lf.size:
        raise IntegrityError(
            f"{where} is corrupt: {len(head)} + {len(block)} bytes read at offset {lf.offset}, "
            f"the commit recorded {lf.head} + {lf.size}",
            where,
        )
    verify(b"".join((head, block)), lf.checksum, where)
    return _decode(head, [block], [lf], where)[lf.ref]


def _decode(
    head: bytes | memoryview,
    framed: Sequence[bytes | memoryview],
    logs: Sequence[LogFile],
    where: str,
) -> dict[str, pa.Table]:
    """Blocks `framed` (stored bytes, verified) of the stream starting with `head`, named
    by `logs` (the same order), decoded as one stream."""
    dctx = zstandard.ZstdDecompressor()
    stream = b"".join([bytes(head), *(_unframe(f, where, dctx) for f in framed), _EOS])
    with _reader(stream, where) as r:
        header = _object_header(r.schema, where)
        batches, owns = [], []
        for got in r.iter_batches_with_custom_metadata():
            batches.append(got.batch)
            owns.append(_block_header(got.custom_metadata, where))
        schema = r.schema
    if len(batches) != len(logs):
        raise IntegrityError(f"{where} is corrupt: {len(batches)} blocks decoded", where)
    for own, lf in zip(owns, logs, strict=True):
        _check(header, own, lf, where)
    sizes = [b.num_rows for b in batches]
    rows = pa.Table.from_batches(batches, schema).replace_schema_metadata(None)
    rows = _rebuilt(rows, header, owns, sizes)
    starts = itertools.accumulate(sizes, initial=0)
    return {lf.ref: rows.slice(at, n) for lf, at, n in zip(logs, starts, sizes, strict=False)}


def _reader(data: bytes | memoryview, where: str) -> ipc.RecordBatchStreamReader:
    try:
        return ipc.open_stream(pa.BufferReader(data), options=_READ_OPTIONS)
    except (pa.ArrowInvalid, OSError) as exc:
        raise IntegrityError(f"{where} is no log object: {exc}", where) from exc


def _object_header(schema: pa.Schema, where: str) -> dict[str, Any]:
    try:
        header: dict[str, Any] = json.loads((schema.metadata or {})[_HEADER])
    except (KeyError, ValueError) as exc:
        raise IntegrityError(f"{where} has no log object header", where) from exc
    if header.get("format") != OBJECT_FORMAT:
        raise TimelineError(f"{where}: unsupported log format {header.get('format')!r}")
    return header


def _block_header(meta: Mapping[bytes, bytes] | None, where: str) -> dict[str, Any]:
    try:
        own: dict[str, Any] = json.loads((meta or {})[_BLOCK])
    except (KeyError, ValueError) as exc:
        raise IntegrityError(f"{where} holds a block without its header", where) from exc
    return own


def _check(header: Mapping[str, Any], own: Mapping[str, Any], lf: LogFile, where: str) -> None:
    got = (header.get("instant"), own.get("file_group"), own.get("block"))
    if got != lf.block_id:
        raise IntegrityError(
            f"{where} holds block {got} at offset {lf.offset}, but its commit names {lf.block_id}",
            where,
        )


def _rebuilt(
    rows: pa.Table, header: Mapping[str, Any], owns: Sequence[Mapping[str, Any]], sizes: list[int]
) -> pa.Table:
    """`rows` (the blocks' batches, in order) with the implied columns put back."""
    upserts = [int(o["upserts"]) for o in owns] if all("upserts" in o for o in owns) else None
    if upserts is not None and OP_COL not in rows.column_names:
        ops = np.repeat(np.tile(np.array([b"U", b"D"]), len(sizes)), _runs(upserts, sizes))
        op_arr = pc.cast(pa.array(ops, pa.binary()), pa.string())
        rows = rows.append_column(OP_COL, op_arr)
    return rebuild_columns(rows, header)


def _runs(upserts: list[int], sizes: list[int]) -> np.ndarray:
    """Per block, its upserts then its deletes, as run lengths."""
    out = np.empty(2 * len(sizes), dtype=np.int64)
    out[0::2] = upserts
    out[1::2] = np.asarray(sizes, dtype=np.int64) - np.asarray(upserts, dtype=np.int64)
    return out
