"""JSON on stdout: strict JSON always (NaN and +/-Infinity become null, as JSON has neither)."""

from __future__ import annotations

import json
import math
from typing import Any


def _finite(v: Any) -> Any:
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_finite(x) for x in v]
    return v


def dumps(value: Any, **kwargs: Any) -> str:
    """`json.dumps` that never writes NaN/Infinity (which no strict JSON parser reads)."""
    kwargs.setdefault("default", str)
    return json.dumps(_finite(value), allow_nan=False, **kwargs)
