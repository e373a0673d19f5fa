"""Importing the core packages loads no boto3/botocore: the S3 backend is imported on first
use of `S3ObjectStore` or of an s3:// URI, so local-only
use and CLI start-up do not pay for it."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.unit

_PROBE = "import sys, {0}; print('boto3' in sys.modules, 'botocore' in sys.modules)"


@pytest.mark.parametrize("package", ["storage", "timeline", "provenance"])
def test_import_loads_no_boto3(package: str) -> None:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE.format(package)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert out == ["False", "False"], f"import {package} loaded boto3/botocore: {out}"


def test_s3_backend_loads_boto3_on_first_use() -> None:
    code = (
        "import sys, storage\n"
        "print('botocore' in sys.modules)\n"
        "storage.S3ObjectStore\n"
        "print('boto3' in sys.modules, 'botocore' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["False", "True", "True"]
