"""Settings the Spark integration derives from a session's conf.

The s3a options (`spark.hadoop.fs.s3a.*`) are the one source of truth for where S3 is: the
driver's flowledger store and Spark's JVM reach the same endpoint with the same credentials.
Table settings follow Hudi's names under `spark.flowledger.` (writer options use the bare name).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from storage import StoreSettings
from timeline import KeyedIndex, TableSettings

from .commit_info import REPO_CONF_KEY
from .errors import SparkWriteError

S3A = "spark.hadoop.fs.s3a."
#: Writer option / Spark conf (with the `spark.flowledger.` prefix) → TableSettings field.
TABLE_OPTIONS = MappingProxyType(
    {
        "hoodie.cleaner.policy.failed.writes": "failed_writes_cleaner_policy",
        "hoodie.client.heartbeat.interval_in_ms": "heartbeat_interval_ms",
        "hoodie.client.heartbeat.tolerable.misses": "heartbeat_tolerable_misses",
        "hoodie.parquet.compression.codec": "parquet_compression_codec",
    }
)
#: Options whose values are names, not whole numbers: the policy in capitals (Hudi's
#: spelling), the codec as given (its setting parses any case).
NAMED_OPTIONS: Mapping[str, Callable[[str], str]] = MappingProxyType(
    {"failed_writes_cleaner_policy": str.upper, "parquet_compression_codec": str.strip}
)
CONF_PREFIX = "spark.flowledger."
#: Writer option / Spark conf (with the `spark.flowledger.` prefix) naming the index a keyed
#: write looks its keys up in (`TableSettings.keyed_index`; Hudi's `hoodie.index.type`
#: names the key scope here, as its global and partition indexes do).
KEYED_INDEX_OPTION = "keyedIndex"
#: The s3a options `store_settings` reads (after `S3A`).
S3A_OPTIONS = (
    "endpoint",
    "connection.ssl.enabled",
    "endpoint.region",
    "access.key",
    "secret.key",
    "path.style.access",
)
#: Every key a write reads from the session's conf: its store, its table settings and the
#: provenance repository.
WRITE_KEYS = (
    *(S3A + name for name in S3A_OPTIONS),
    *(CONF_PREFIX + name for name in TABLE_OPTIONS),
    CONF_PREFIX + KEYED_INDEX_OPTION,
    REPO_CONF_KEY,
)


def conf_of(spark: Any) -> dict[str, str]:
    """The session's conf: SparkContext conf overlaid with runtime SQL conf."""
    conf = {str(k): str(v) for k, v in spark.sparkContext.getConf().getAll()}
    with contextlib.suppress(AttributeError, TypeError):  # older PySpark: SparkContext only
        conf.update({str(k): str(v) for k, v in spark.conf.getAll.items()})
    return conf


def write_conf(spark: Any) -> dict[str, str]:
    """The session's conf for a write: only `WRITE_KEYS` (those set), one py4j call each.

    `conf_of` copies the whole conf, a few py4j calls per entry (hundreds on a session with
    s3a set up), each making a JVM object py4j later releases with a call of its own. The
    runtime conf holds the SparkContext's entries too (a session's SQL conf starts from them)
    and what `spark.conf.set` changed since, which is what `conf_of` overlays."""
    conf = spark.conf
    values = ((key, conf.get(key, None)) for key in WRITE_KEYS)
    return {key: str(value) for key, value in values if value is not None}


def store_settings(conf: Mapping[str, str]) -> StoreSettings:
    """StoreSettings from the AWS variables, overridden by the session's s3a options."""
    base = StoreSettings()
    changes: dict[str, Any] = {}
    if endpoint := conf.get(S3A + "endpoint"):
        if "://" not in endpoint:
            ssl = conf.get(S3A + "connection.ssl.enabled", "true") == "true"
            endpoint = ("https://" if ssl else "http://") + endpoint
        changes["endpoint_url"] = endpoint
    if region := conf.get(S3A + "endpoint.region"):
        changes["region"] = region
    access, secret = conf.get(S3A + "access.key"), conf.get(S3A + "secret.key")
    if access and secret:
        changes["access_key_id"], changes["secret_access_key"] = access, secret
    if (style := conf.get(S3A + "path.style.access")) is not None:
        changes["path_style_access"] = style == "true"
    return replace(base, **changes) if changes else base


def table_settings(
    conf: Mapping[str, str], options: Mapping[str, str] | None = None
) -> TableSettings:
    """TableSettings from `spark.flowledger.hoodie.*` conf, overridden by writer options."""
    values: dict[str, Any] = {}
    for name, attr in TABLE_OPTIONS.items():
        raw = (options or {}).get(name) or conf.get(CONF_PREFIX + name)
        if raw is None:
            continue
        try:
            values[attr] = NAMED_OPTIONS[attr](raw) if attr in NAMED_OPTIONS else int(raw)
        except ValueError:
            raise SparkWriteError(f"option {name} must be a whole number, not {raw!r}") from None
    if (index := keyed_index(conf, options or {})) is not None:
        values["keyed_index"] = index
    try:
        return TableSettings(**values)
    except ValueError as exc:
        raise SparkWriteError(f"{exc} (options {', '.join(TABLE_OPTIONS)})") from None


def keyed_index(conf: Mapping[str, str], options: Mapping[str, str]) -> KeyedIndex | None:
    """The `keyedIndex` writer option (any case), else `spark.flowledger.keyedIndex`; None
    when neither is set (the setting's default). Another name is refused in one line."""
    lowered = {str(k).lower(): str(v) for k, v in options.items()}
    raw = lowered.get(KEYED_INDEX_OPTION.lower()) or conf.get(CONF_PREFIX + KEYED_INDEX_OPTION)
    if raw is None:
        return None
    try:
        return KeyedIndex.parse(raw, KEYED_INDEX_OPTION)
    except ValueError as exc:
        raise SparkWriteError(str(exc)) from None
