"""The file objects over byte ranges pyarrow reads Parquet through (storage/ranged_file.py)."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from storage import FetchedRanges, RangedFile

pytestmark = pytest.mark.unit


def _parquet(rows: int = 1000, group: int = 100) -> bytes:
    buf = io.BytesIO()
    pq.write_table(pa.table({"k": list(range(rows))}), buf, row_group_size=group)
    return buf.getvalue()


def test_fetched_ranges_serve_reads_within_the_pieces_held() -> None:
    f = FetchedRanges(10, kept=[(8, b"89")])
    f.hold([(0, b"0123"), (4, b"4567")])
    assert (f.read(3), f.tell()) == (b"012", 3)
    assert f.seek(-2, io.SEEK_END) == 8 and f.read() == b"89"
    f.seek(4)
    assert f.read(4) == b"4567"
    assert f.read(5) == b"89"  # clipped at the end of the file
    assert f.read(1) == b""


def test_fetched_ranges_refuse_bytes_not_fetched() -> None:
    f = FetchedRanges(10)
    f.hold([(0, b"0123")])
    f.seek(2)
    with pytest.raises(ValueError, match=r"bytes \[2, 6\) of the file were not fetched"):
        f.read(4)
    f.hold([(4, b"4567")])  # the pieces held before are let go
    f.seek(0)
    with pytest.raises(ValueError, match="not fetched"):
        f.read(1)


def test_pyarrow_reads_a_row_group_from_the_pieces_held() -> None:
    body = _parquet()
    md = pq.read_metadata(pa.BufferReader(body))
    rg = md.row_group(3)
    start = rg.column(0).dictionary_page_offset or rg.column(0).data_page_offset
    end = start + rg.column(0).total_compressed_size
    f = FetchedRanges(len(body))
    f.hold([(start, body[start:end])])
    got = pq.ParquetFile(f, metadata=md).read_row_group(3)
    assert got.column("k").to_pylist() == list(range(300, 400))


class _Counting(RangedFile):
    """Serves a whole object, counting the reads that reach it."""

    def __init__(self, body: bytes) -> None:
        super().__init__(len(body))
        self.body, self.calls = body, 0

    def bytes_at(self, start: int, length: int) -> bytes:
        self.calls += 1
        return self.body[start : start + length]


def test_a_ranged_file_serves_each_read_by_one_call_and_readinto_fills_buffers() -> None:
    body = _parquet(rows=50, group=10)
    f = _Counting(body)
    assert pq.ParquetFile(f).read().column("k").to_pylist() == list(range(50))
    f.seek(0)
    f.calls = 0
    buf = bytearray(4)
    assert (f.readinto(buf), bytes(buf), f.calls) == (4, b"PAR1", 1)
    assert (f.readable(), f.seekable(), f.writable(), f.size) == (True, True, False, len(body))
