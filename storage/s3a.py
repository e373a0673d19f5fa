"""Hadoop s3a settings for Spark, derived from the same `StoreSettings` flowledger uses."""

from __future__ import annotations

from .settings import StoreSettings
from .uri import parse_uri


def s3a_conf(settings: StoreSettings) -> dict[str, str]:
    """`spark.hadoop.fs.s3a.*` options that reach the endpoint `settings` describe."""
    conf = {
        "spark.hadoop.fs.s3a.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        "spark.hadoop.fs.s3a.endpoint.region": settings.region,
        "spark.hadoop.fs.s3a.attempts.maximum": str(settings.attempts_maximum),
        "spark.hadoop.fs.s3a.connection.maximum": str(settings.connection_maximum),
        "spark.hadoop.fs.s3a.multipart.size": str(settings.multipart_size),
        "spark.hadoop.fs.s3a.fast.upload.active.blocks": str(settings.fast_upload_active_blocks),
        "spark.hadoop.fs.s3a.fast.upload.buffer": settings.fast_upload_buffer,
    }
    if settings.buffer_dir:
        conf["spark.hadoop.fs.s3a.buffer.dir"] = settings.buffer_dir
    if settings.endpoint_url:
        conf["spark.hadoop.fs.s3a.endpoint"] = settings.endpoint_url
        conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] = str(
            settings.endpoint_url.startswith("https://")
        ).lower()
    path_style = settings.path_style_access
    if path_style is None:
        path_style = settings.endpoint_url is not None
    conf["spark.hadoop.fs.s3a.path.style.access"] = str(path_style).lower()
    if settings.access_key_id and settings.secret_access_key:
        conf["spark.hadoop.fs.s3a.access.key"] = settings.access_key_id
        conf["spark.hadoop.fs.s3a.secret.key"] = settings.secret_access_key
        conf["spark.hadoop.fs.s3a.aws.credentials.provider"] = (
            "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
        )
    return conf


def to_spark_path(uri: str) -> str:
    """The path Spark reads and writes for a repository URI (`s3a://` for S3)."""
    parsed = parse_uri(uri)
    if parsed.scheme == "file":
        return "file://" + parsed.path
    return f"s3a://{parsed.bucket}/{parsed.path}".rstrip("/")
