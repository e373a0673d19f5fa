"""Kept for imports from older branches: JSON rendering lives in `flowledger.output`."""

from __future__ import annotations

from .output import dumps

__all__ = ["dumps"]
