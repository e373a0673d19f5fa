"""Test tiers: the markers, which tiers a run requires, and how an unavailable tier is reported."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

TIERS = ("unit", "s3", "minio", "spark", "faults")


def required_tiers() -> set[str]:
    """Tiers named in `FLOWLEDGER_REQUIRE_TIERS` (set by `make test` and CI)."""
    return {t for t in os.environ.get("FLOWLEDGER_REQUIRE_TIERS", "").split(",") if t}


def unavailable(tier: str, why: str) -> NoReturn:
    """Skip the test, or fail it when the run requires this tier."""
    if tier in required_tiers():
        pytest.fail(f"{tier} tier required but unavailable: {why}")
    pytest.skip(f"{tier} tier unavailable: {why}")
