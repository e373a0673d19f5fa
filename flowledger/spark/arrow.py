"""Spark schemas as the table records them."""

from __future__ import annotations

from typing import Any


def arrow_schema(spark_schema: Any) -> Any:
    """The Arrow schema of a Spark schema as the table records it: every column nullable, as
    Spark's Parquet writer makes them (so both write paths record the same schema)."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    arrow = to_arrow_schema(spark_schema, timezone="UTC", prefers_large_types=False)
    return pa.schema([f.with_nullable(True) for f in arrow])
