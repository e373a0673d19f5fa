"""Settings of the object-store layer (one frozen object; see docs/configuration.md)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from .upload_buffers import BufferPolicy, FastUploadBuffer

MiB = 1024 * 1024


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


def _env_tristate(name: str) -> bool | None:
    """On, off, or unset (None) from an environment variable."""
    value = os.environ.get(name, "").strip().lower()
    if not value:
        return None
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ValueError(f"${name} must be on or off, not {value!r}")


@dataclass(frozen=True)
class StoreSettings:
    """How to reach and use an object store.

    Names follow Hadoop s3a's (`fs.s3a.multipart.size`, `fs.s3a.attempts.maximum`, ...)
    where one exists. Endpoint, region and credentials default to the standard AWS variables.
    """

    endpoint_url: str | None = field(default_factory=lambda: os.environ.get("AWS_ENDPOINT_URL"))
    region: str = field(
        default_factory=lambda: (
            os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
        )
    )
    access_key_id: str | None = field(
        default_factory=lambda: os.environ.get("AWS_ACCESS_KEY_ID"), repr=False
    )
    secret_access_key: str | None = field(
        default_factory=lambda: os.environ.get("AWS_SECRET_ACCESS_KEY"), repr=False
    )
    #: s3a `fs.s3a.path.style.access`; None = path style when an endpoint is set (MinIO, moto).
    path_style_access: bool | None = None
    #: s3a `fs.s3a.attempts.maximum`: total attempts for throttling, 5xx and transport errors.
    attempts_maximum: int = 5
    #: s3a `fs.s3a.retry.limit`: retries after a refused or dropped connection (a read timeout
    #: is never retried: a hung endpoint fails after one `connection_timeout`).
    retry_limit: int = 1
    #: Seconds a write whose answer was lost keeps reading its object back (with backoff)
    #: while the endpoint does not answer, to learn whether it landed before reporting an
    #: unknown outcome (docs/faults.md).
    read_back_timeout: float = field(
        default_factory=lambda: float(os.environ.get("FLOWLEDGER_READ_BACK_TIMEOUT") or 30.0)
    )
    #: s3a `fs.s3a.connection.establish.timeout` (seconds).
    connection_establish_timeout: float = 5.0
    #: s3a `fs.s3a.connection.timeout` (seconds) for reading a response.
    connection_timeout: float = 60.0
    #: s3a `fs.s3a.connection.maximum`: HTTP connection pool size.
    connection_maximum: int = 32
    #: s3a `fs.s3a.multipart.size`: part size of streaming uploads (S3 minimum 5 MiB).
    multipart_size: int = 8 * MiB
    #: s3a `fs.s3a.multipart.purge.age` (seconds): incomplete multipart uploads (local: temp
    #: files) older than this are removed by `content cleanup` and at content-repository start.
    multipart_purge_age: float = 24 * 3600.0
    #: s3a `fs.s3a.fast.upload.active.blocks`: parts uploading at once per stream.
    fast_upload_active_blocks: int = 4
    #: Whether a PUT's signature covers the SHA-256 of its body. None: botocore's choice
    #: (signed over http, UNSIGNED-PAYLOAD over https, where TLS protects the body). Off:
    #: never, sparing a hash of every byte uploaded on a trusted plain-http network (the
    #: server then cannot reject a body damaged in transit; readers still verify the
    #: checksums the objects carry). On: also over https.
    payload_signing: bool | None = field(
        default_factory=lambda: _env_tristate("FLOWLEDGER_S3_PAYLOAD_SIGNING")
    )
    #: s3a `fs.s3a.fast.upload.buffer`: where a streaming upload holds a part until it is
    #: sent. `disk`: in memory while the store's upload buffers stay within
    #: `fast_upload_buffer_memory`, beyond it in a temp file under `buffer_dir`; `array`: in
    #: memory always (up to `fast_upload_active_blocks` + 1 parts per open upload).
    fast_upload_buffer: FastUploadBuffer = "disk"
    #: Bytes of parts all uploads of a store (and its scoped views) hold in memory at most
    #: with `disk` (no s3a counterpart: s3a's `disk` writes every part to disk); an object
    #: under one part never touches disk while the store is within it.
    fast_upload_buffer_memory: int = 64 * MiB
    #: s3a `fs.s3a.buffer.dir`: where parts past the memory budget are held (anonymous temp
    #: files, gone on commit, abort or a crash); None = the system temp directory.
    buffer_dir: str | None = field(default_factory=lambda: os.environ.get("FLOWLEDGER_BUFFER_DIR"))
    #: Run against an endpoint that ignores conditional writes (loses atomicity; opt-in only).
    allow_unsafe: bool = field(default_factory=lambda: _env_flag("FLOWLEDGER_ALLOW_UNSAFE"))
    #: Local backend: fsync files and directories before a write returns.
    fsync: bool = True
    #: Seconds a safe answer of the conditional-write probe stays cached on disk per endpoint
    #: and bucket (under ~/.cache/flowledger/capabilities); 0 = probe in every process.
    capability_cache_ttl: float = 3600.0
    #: GETs and HEADs through obstore (storage/s3_reads.py); anything but a definite answer
    #: still goes to botocore. Off: botocore only.
    fast_reads: bool = True
    #: Plain PUTs of up to `multipart_size` bytes through obstore (storage/s3_puts.py): about
    #: a sixth of botocore's CPU per PUT; anything but a definite answer is sent again through
    #: botocore. Conditional writes and multipart uploads always go through botocore.
    fast_puts: bool = True

    def upload_buffer_policy(self) -> BufferPolicy:
        """How a streaming upload buffers its parts (storage/upload_buffers.py)."""
        return BufferPolicy(
            self.fast_upload_buffer, self.fast_upload_buffer_memory, self.buffer_dir
        )

    def __post_init__(self) -> None:
        self.upload_buffer_policy()  # validates the buffer settings
        if self.multipart_size < 5 * MiB:
            raise ValueError("multipart_size must be at least 5 MiB (the S3 part minimum)")
        if self.fast_upload_active_blocks < 1 or self.attempts_maximum < 1:
            raise ValueError("fast_upload_active_blocks and attempts_maximum must be >= 1")
        if self.retry_limit < 0:
            raise ValueError("retry_limit must be >= 0")
        if self.read_back_timeout < 0:
            raise ValueError("read_back_timeout must be >= 0")
