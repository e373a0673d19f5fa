"""The Spark stages: type and clean each input, join flights with weather, airports and
planes, aggregate delays per carrier, and the late correction of one month.

Flights get a surrogate record key, `flight_id` (`2013-12-01 UA1545 EWR`: date, carrier,
flight number, origin), since the data has no key column: a carrier's flight number leaves an
origin at most once a day, so the four name one flight (unique over all 336,776), and being
made of the flight's own values it is the same in every delivery of the data — what lets a
re-delivered flight be upserted over the stored one. Dates first: keys are time-ordered, so
the key ranges of the month partitions do not overlap (docs/tables.md, "Index")."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_TS = "yyyy-MM-dd'T'HH:mm:ssX"

#: The flights' record key (see the module docstring).
FLIGHT_KEY = "flight_id"


def to_frame(spark: SparkSession, table: pa.Table) -> DataFrame:
    """An Arrow table (parsed by pyarrow.csv on the driver) as a Spark DataFrame."""
    with warnings.catch_warnings():
        # PySpark checks the pandas version on this path although no pandas is used.
        warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
        return spark.createDataFrame(table)


def clean(name: str, df: DataFrame) -> DataFrame:
    """Typed and cleaned: timestamps parsed (UTC), strings trimmed, duplicates removed.
    Flights keep every row (336,776): a cancelled flight is flagged, not dropped."""
    from pyspark.sql import functions as F

    if name == "flights":
        key = F.format_string(
            "%04d-%02d-%02d %s%d %s", "year", "month", "day", F.trim("carrier"), "flight", "origin"
        )
        return df.select(
            key.alias(FLIGHT_KEY),
            *[c for c in df.columns if c not in ("time_hour", "carrier", "tailnum")],
            F.trim("carrier").alias("carrier"),
            F.trim("tailnum").alias("tailnum"),
            F.to_timestamp("time_hour", _TS).alias("time_hour"),
            F.col("dep_time").isNull().alias("cancelled"),
        )
    if name == "weather":
        return (
            df.withColumn("time_hour", F.to_timestamp("time_hour", _TS))
            .dropDuplicates(["origin", "time_hour"])
            .select(
                "origin",
                "time_hour",
                "temp",
                "wind_speed",
                "precip",
                "visib",
                (F.col("precip") > 0).alias("raining"),
            )
        )
    if name == "airports":
        return df.dropDuplicates(["faa"]).select(
            F.col("faa"), F.col("name").alias("dest_name"), "lat", "lon", "tz"
        )
    if name == "planes":
        return df.dropDuplicates(["tailnum"]).select(
            "tailnum", F.col("year").alias("plane_year"), "manufacturer", "model", "seats"
        )
    return df.select(F.trim("carrier").alias("carrier"), "name")


def enrich(cleaned: dict[str, DataFrame]) -> DataFrame:
    """flights ⟕ weather (origin, hour) ⟕ airports (dest) ⟕ planes (tailnum): one row per
    flight, so the row count stays the source's."""
    from pyspark.sql import functions as F

    f, w = cleaned["flights"], cleaned["weather"]
    airports, planes = cleaned["airports"], cleaned["planes"]
    joined = (
        f.join(w, ["origin", "time_hour"], "left")
        .join(airports.select(F.col("faa").alias("dest"), "dest_name", "tz"), ["dest"], "left")
        .join(planes, ["tailnum"], "left")
    )
    return joined.withColumn("raining", F.coalesce(F.col("raining"), F.lit(False))).withColumn(
        "revision", F.lit(1)
    )


def delays_by_carrier(enriched: DataFrame, airlines: DataFrame) -> DataFrame:
    """One row per carrier: flights, mean departure and arrival delay, in rain and overall."""
    from pyspark.sql import functions as F

    rain = F.col("raining")
    return (
        enriched.groupBy("carrier")
        .agg(
            F.count(F.lit(1)).alias("flights"),
            F.round(F.avg("dep_delay"), 2).alias("mean_dep_delay"),
            F.round(F.avg("arr_delay"), 2).alias("mean_arr_delay"),
            F.sum(F.when(rain, 1).otherwise(0)).alias("rain_flights"),
            F.round(F.avg(F.when(rain, F.col("dep_delay"))), 2).alias("mean_dep_delay_rain"),
        )
        .join(airlines, ["carrier"], "left")
        .orderBy("carrier")
    )


def corrected_flights(enriched: DataFrame, month: int) -> DataFrame:
    """The late correction's updates: the month's diverted flights (departed, never arrived:
    arr_delay missing) re-delivered with the delay they departed with as arrival delay, as
    revision 2."""
    from pyspark.sql import functions as F

    diverted = (
        (F.col("month") == month) & F.col("arr_delay").isNull() & F.col("dep_delay").isNotNull()
    )
    return (
        enriched.where(diverted)
        .withColumn("arr_delay", F.col("dep_delay"))
        .withColumn("revision", F.lit(2))
    )


def cancelled_flights(enriched: DataFrame, month: int) -> DataFrame:
    """The late correction's deletes: the keys of the month's cancelled flights (the
    re-delivered month no longer lists them)."""
    from pyspark.sql import functions as F

    return enriched.where((F.col("month") == month) & F.col("cancelled")).select(FLIGHT_KEY)


def worst_in_rain(
    enriched: DataFrame, airlines: DataFrame, top: int = 5
) -> list[dict[str, object]]:
    """The real question: which carriers have the worst mean departure delay in rain?"""
    from pyspark.sql import functions as F

    rows = (
        enriched.where(F.col("raining") & F.col("dep_delay").isNotNull())
        .groupBy("carrier")
        .agg(
            F.count(F.lit(1)).alias("flights_in_rain"),
            F.round(F.avg("dep_delay"), 1).alias("mean_dep_delay_rain"),
        )
        .where(F.col("flights_in_rain") >= 100)
        .join(airlines, ["carrier"], "left")
        .orderBy(F.desc("mean_dep_delay_rain"))
        .limit(top)
        .collect()
    )
    return [r.asDict() for r in rows]
