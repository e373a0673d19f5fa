"""Integrity benchmark: what checksums add to each path that writes or reads a committed object,
each measured against the same operation without them in the same run (ratios; checksums add
no request, so request counts are equal by construction and printed for the record).

    python -m bench integrity [--quick]
"""

from __future__ import annotations

import argparse
import io
import json
import time
from collections.abc import Callable

import pyarrow as pa
import pyarrow.parquet as pq

from bench.common import console, table
from bench.provenance import synthetic
from provenance.catalog import Sums
from provenance.parquet_io import decode_journal, encode_events_file, encode_journal
from provenance.schema import assign_ids, conform
from storage import checksum_of, open_json, seal_json, verify
from storage.integrity import canonical
from timeline.metadata import DataFile, Entry, write_metadata
from timeline.parquet_io import checksummed, to_parquet_bytes


def best(fn: Callable[[], object], repeat: int) -> float:
    """Best of `repeat` runs (the least disturbed by other processes on a shared machine)."""
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return min(out)


def pair(
    name: str, base: Callable[[], object], new: Callable[[], object], repeat: int, per: int = 1
) -> tuple[str, float, float]:
    """Baseline and checksummed version run alternately (the same load for both), best of
    `repeat` each, per operation."""
    a, b = [], []
    for _ in range(repeat):
        a.append(best(base, 1))
        b.append(best(new, 1))
    return name, min(a) / per, min(b) / per


def _entry(files: int) -> Entry:
    added = [
        DataFile(f"data/20260101000000000/p={i}/f{i}.parquet", 123456, 1000, f"p={i}", f"g{i}")
        for i in range(files)
    ]
    return Entry(7, "20260101000000000", "commit", "writer-1", write_metadata("insert", added))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="bench.integrity", description=__doc__)
    ap.add_argument("--quick", action="store_true", help="small smoke run")
    args = ap.parse_args(argv)
    events = 50_000 if args.quick else 500_000
    repeat = 3 if args.quick else 9
    rows: list[tuple[str, float, float]] = []

    # timeline commit: the entry body (written twice: log + completed object) and decoding it
    e = _entry(10)
    fields = {
        "format": "flowledger.timeline/1",
        "seq": e.seq,
        "instant_time": e.time,
        "action": e.action,
        "writer": e.writer,
        "metadata": e.metadata,
    }
    body = e.encode()
    n = 2000
    rows.append(
        pair(
            "timeline commit body encode (10 files)",
            lambda: [canonical(fields) for _ in range(n)],  # the encoding before checksums
            lambda: [e.encode() for _ in range(n)],
            repeat,
            n,
        )
    )
    rows.append(
        pair(
            "timeline commit body decode",
            lambda: [json.loads(body) for _ in range(n)],
            lambda: [open_json(body, "x") for _ in range(n)],
            repeat,
            n,
        )
    )
    doc = {"next_event_id": 123456789, "writer": "w" * 32, "nonce": "n" * 32}
    rows.append(
        pair(
            "id allocator document encode",
            lambda: [json.dumps(doc).encode() for _ in range(n)],
            lambda: [seal_json(doc) for _ in range(n)],
            repeat,
            n,
        )
    )

    # table write / read: a data file's checksum in its commit metadata
    data = synthetic(0, events, events).select(["event_type", "flowfile_uuid", "file_size"])
    parquet = to_parquet_bytes(data)
    f = DataFile("k", len(parquet), data.num_rows)
    sealed = checksummed(f, parquet)
    rows.append(
        pair(
            f"table write: Parquet encode ({len(parquet) >> 10} KiB)",
            lambda: to_parquet_bytes(data),
            lambda: checksummed(f, to_parquet_bytes(data)),
            repeat,
        )
    )
    rows.append(
        pair(
            "table read: Parquet decode",
            lambda: pq.read_table(io.BytesIO(parquet)),
            lambda: (verify(parquet, sealed.checksum, "k"), pq.read_table(io.BytesIO(parquet))),
            repeat,
        )
    )

    # provenance ingest: journal encode (+ CRC trailer) and decode (+ check); rollover
    events_t = assign_ids(conform(synthetic(0, events, events), 65536), 0)
    raw = _ipc(events_t)
    journal = encode_journal(events_t, "lz4")
    rows.append(
        pair(
            f"provenance ingest: journal encode ({events:,} events)",
            lambda: _ipc(events_t),
            lambda: encode_journal(events_t, "lz4"),
            repeat,
        )
    )
    rows.append(
        pair(
            "provenance read: journal decode",
            lambda: _ipc_read(raw),
            lambda: decode_journal(journal, "j", events),
            repeat,
        )
    )
    merged = encode_events_file(events_t, 10_000, "zstd", 3)
    rows.append(
        pair(
            f"provenance rollover: events file ({len(merged) >> 10} KiB)",
            lambda: encode_events_file(events_t, 10_000, "zstd", 3),
            lambda: Sums.of_bytes(encode_events_file(events_t, 10_000, "zstd", 3)),
            repeat,
        )
    )
    crc_mb = len(merged) / best(lambda: checksum_of(merged), repeat) / 2**20

    out = table(
        "Checksum cost per operation (best of runs; same run, same data)",
        "operation", "without checksum", "with checksum", "ratio",
    )  # fmt: skip
    for name, base, new in rows:
        out.add_row(name, _t(base), _t(new), f"{new / base:.3f}x")
    console.print(out)
    console.print(f"CRC-32 throughput: {crc_mb:,.0f} MiB/s; requests per operation: unchanged")


def _ipc(t: pa.Table) -> bytes:
    import pyarrow.ipc as ipc

    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, t.schema, options=ipc.IpcWriteOptions(compression="lz4")) as w:
        w.write_table(t)
    return bytes(sink.getvalue())


def _ipc_read(data: bytes) -> pa.Table:
    import pyarrow.ipc as ipc

    return ipc.open_stream(pa.py_buffer(data)).read_all()


def _t(s: float) -> str:
    return f"{s * 1e6:,.1f} µs" if s < 1e-3 else f"{s * 1e3:,.2f} ms"


if __name__ == "__main__":
    main()
