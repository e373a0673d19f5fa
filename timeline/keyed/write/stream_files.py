"""The files a streamed insert writes (keyed/write/stream.py): a target (a small file it
fills, or a new file group) and the open file writing it, its upload and its encoder, with
the keys it keeps for its filter. They read the stream only through `StreamFiles`, so the
stream's own state stays in stream.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import chain
from typing import TYPE_CHECKING, Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from ...file_stats import describe_footer
from ...metadata import DataFile
from ..index import BloomBuilder
from ..keys import RECORD_KEY_COL
from .base_copy import CopiedBase, SliceFooters, base_to_copy
from .planner import Planner
from .slice_writer import SliceEncoder, SliceOut, WrittenSlice, base_rows, slice_stats
from .written_keys import KeyRuns

if TYPE_CHECKING:
    from storage import ObjectStore, ObjectWriter


class StreamFiles(Protocol):
    """What an open file reads of the stream writing it."""

    store: ObjectStore
    out: SliceOut
    plan: Planner
    settings_rows: int  # rows per row group
    codec: str  # the files' compression (pyarrow's name)
    key_col: str | None  # the integer key column, when there is one
    fpp: float  # the bloom filters' false-positive rate
    footers: SliceFooters  # the small files' copy checks

    def upload_room(self) -> int:
        """The bytes of parts the open files' uploads may hold in memory at the moment."""
        ...


@dataclass
class Target:
    """A file the stream writes: a new slice of `base`'s group (a small file it fills) or a
    new file group; it takes `capacity` new records."""

    group: str
    base: DataFile | None
    capacity: int


class OpenFile:
    """One file being written: its upload and its encoder. A small file it fills goes in
    first, as it opens (its row groups copied as bytes when `copyable`, else decoded), then
    the stream's new records: old rows then new ones, as an insert of a table orders them."""

    def __init__(self, w: StreamFiles, partition: str, target: Target) -> None:
        self.w, self.partition, self.target = w, partition, target
        self.key = w.out.slice_key(partition, target.group)
        # The file's keys, for its filter (sized for their count, known as it closes): the
        # integer key column's numbers when there is one, as the progressions they come in
        # (three numbers for a run of ids), else the record keys. The filled small file's
        # (`old`) apart from the new records' (`keys`, which the record-level index takes).
        self.old = KeyRuns()
        self.keys = KeyRuns()
        self.inserts = 0
        self.upload: ObjectWriter = w.store.open_writer(self.key, memory=w.upload_room)
        try:
            self.enc = self._encoder(target.base)
        except BaseException:
            self.upload.abort()
            raise

    def _encoder(self, base: DataFile | None) -> SliceEncoder:
        """The file's encoder, the small file `base` it fills already in it: its row groups
        copied as bytes (keyed/write/base_copy.py: its checksum verified, a big file copied
        in pieces; only its key column decoded), else its rows decoded and added (a file of
        another schema). Its bytes are let go once it is in: the encoder keeps the footer."""
        w = self.w
        schema, rows, codec = w.out.schema, w.settings_rows, w.codec
        if base is None:
            return SliceEncoder(schema, rows, self.upload, codec=codec)
        lead, body = base_to_copy(w.store, base, schema, footers=w.footers)
        if lead is not None:
            noted = _Noted(lead, self._note_old)
            return SliceEncoder(schema, rows, self.upload, lead=noted, codec=codec)
        enc = SliceEncoder(schema, rows, self.upload, codec=codec)
        try:
            for part in base_rows(w.store, base, set(), schema, rows, body):
                self.old.add(part.column(w.key_col or RECORD_KEY_COL))
                enc.add(part)
        except BaseException:
            enc.abandon()
            raise
        return enc

    def _note_old(self, keys: pa.ChunkedArray) -> None:
        """Note a copied small file's record keys (as the integer key column's numbers when
        there is one: its record key is the number as text)."""
        col = self.w.key_col
        self.old.add(pc.cast(keys, self.w.out.schema.field(col).type) if col else keys)

    def add(self, rows: pa.Table) -> None:
        self.keys.add(rows.column(self.w.key_col or RECORD_KEY_COL))
        self.enc.add(rows)
        self.inserts += rows.num_rows

    def close(self) -> tuple[DataFile, dict[str, Any], pa.ChunkedArray]:
        """Finish the file (aborted if that fails); its `DataFile`, write stats and new
        records' keys."""
        w, base = self.w, self.target.base
        try:
            encoded = self.enc.finish()
            self.upload.commit()
        except BaseException:
            self.abort()
            raise
        f = describe_footer(
            self.key, encoded.size, encoded.checksum, encoded.footer, self.partition,
            self.target.group,
        )  # fmt: skip
        # A stream's file learns its key count only as it closes: its filter is built from
        # the keys it noted, as text a row group's worth at a time (the same filter as from
        # all at once). Hashing a chunk takes several times its keys' bytes in temporaries,
        # on each of the pool's threads closing a file: chunks of a row group's keys hold
        # that to what a table insert's encoder takes for a row group's filter.
        bloom = BloomBuilder(self.old.count + self.keys.count, w.fpp)
        chunk = w.settings_rows
        for keys in chain(self.old.texts(chunk), self.keys.texts(chunk)):
            bloom.add(keys)
        written = WrittenSlice(f, encoded.key_range, bloom.finish())
        stats = slice_stats(w.store, written, base, (self.inserts, 0, 0))
        keep = w.plan.record_index is not None  # the new records' keys: for that index only
        new = list(self.keys.texts()) if keep else []
        self.old, self.keys = KeyRuns(), KeyRuns()
        return f, stats, pa.chunked_array(new, pa.string())

    def abort(self) -> None:
        self.enc.abandon()
        self.upload.abort()


class _Noted:
    """A copied base file (`CopiedBase`) whose record keys are handed to `note` as its
    pieces pass."""

    def __init__(self, base: CopiedBase, note: Callable[[pa.ChunkedArray], None]) -> None:
        self._base, self._note = base, note
        self.footer = base.footer

    @property
    def footer_bytes(self) -> bytes:
        return self._base.footer_bytes

    def pieces(self) -> Iterator[tuple[bytes | memoryview, pa.ChunkedArray]]:
        for piece, keys in self._base.pieces():
            self._note(keys)
            yield piece, keys
