"""Helpers of the fault-injection tier: a proxy in front of the session's MinIO, and the CLI
run as a user runs it, against the proxy."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from tests.support.cli import run_cli_process
from tests.support.fault_proxy import Fault, FaultProxy
from tests.support.servers import S3Endpoint

ROOT = Path(__file__).resolve().parents[2]


def proxy_for(server: S3Endpoint) -> FaultProxy:
    up = urlsplit(server.endpoint)
    assert up.hostname is not None and up.port is not None
    return FaultProxy(up.hostname, up.port)


def through(server: S3Endpoint, proxy: FaultProxy) -> S3Endpoint:
    """The same server and credentials, reached through `proxy`."""
    return S3Endpoint(
        server.name, proxy.endpoint, server.access_key, server.secret_key, server.region
    )


def once(
    match: Callable[[str, str], bool], fault: Fault, times: int = 1
) -> Callable[[str, str], Fault]:
    """A rule: `fault` for the first `times` requests `match` accepts, then forward all."""
    left = [times]

    def rule(method: str, path: str) -> Fault:
        if left[0] > 0 and match(method, path):
            left[0] -= 1
            return fault
        return Fault.forward()

    return rule


def cli(
    endpoint: S3Endpoint, tmp_path: Path, *args: str, **env: str
) -> subprocess.CompletedProcess[str]:
    """`flowledger ARGS` in a fresh process, with the endpoint in the standard variables."""
    full = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "AWS_ENDPOINT_URL": endpoint.endpoint,
        "AWS_ACCESS_KEY_ID": endpoint.access_key,
        "AWS_SECRET_ACCESS_KEY": endpoint.secret_key,
        "AWS_REGION": endpoint.region,
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        "FLOWLEDGER_CACHE": str(tmp_path / "cache"),
        "FLOWLEDGER_TIMELINE_CACHE": str(tmp_path / "entries"),
        **env,
    }
    return run_cli_process(*args, env=full, cwd=ROOT, timeout=300)
