"""A keyed file's bloom filter in its two layouts (timeline/keyed/index/bloom.py), side by side
in one run: plain (double hashing over the whole filter, what copy-on-write files carried at
0.01 before; the baseline) against blocked (every bit of a key in one 64-bit word, what they
carry now).

`python -m bench bloom_layouts [--keys N] [--fpp 0.01] [--repeat 5]`

N keys as a file of the upsert benchmark holds them (an integer key's text), the filter built
as a rewrite builds it (`BloomBuilder`: the keys added a row group at a time), then probed
with N other keys (none present: every hit is a false positive) and with the keys themselves
(all must hit). Per layout: the building thread's CPU seconds (best of `--repeat`), what the
builder holds while it fills (tracemalloc: numpy's arrays), the stored bytes, the probe's CPU
seconds and the false-positive rate measured; ratios against plain.
"""

from __future__ import annotations

import argparse
import math
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bench.common import console, table
from timeline.keyed.index.bloom import BloomBuilder, BloomFilter

ROW_GROUP = 131_072  # keys a rewrite adds at a time (`parquet_row_group_rows`)


@dataclass(frozen=True)
class Result:
    layout: str
    build_s: float
    held: int  # bytes the builder held at its largest
    stored: int  # bytes of the finished filter
    probe_s: float
    fpp: float


def plain_builder(expected: int, fpp: float) -> BloomBuilder:
    """The builder as it was before the blocked layout: plain at any rate."""
    return BloomBuilder(expected, fpp, plain=True)


def _best(fn: Callable[[], object], repeat: int) -> tuple[float, object]:
    best, out = math.inf, None
    for _ in range(repeat):
        t0 = time.thread_time()
        out = fn()
        best = min(best, time.thread_time() - t0)
    return best, out


def _build(make: Callable[[int, float], BloomBuilder], keys: pa.Array, fpp: float) -> BloomFilter:
    builder = make(len(keys), fpp)
    for i in range(0, len(keys), ROW_GROUP):
        builder.add(keys.slice(i, ROW_GROUP))
    return builder.finish()


def _held(make: Callable[[int, float], BloomBuilder], keys: pa.Array, fpp: float) -> int:
    tracemalloc.start()
    try:
        _build(make, keys, fpp)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak


def measure(name: str, make: Callable[[int, float], BloomBuilder], keys: pa.Array,
            absent: pa.Array, fpp: float, repeat: int) -> Result:  # fmt: skip
    build_s, built = _best(lambda: _build(make, keys, fpp), repeat)
    assert isinstance(built, BloomFilter)
    if not built.might_contain(keys).all():
        raise AssertionError(f"{name}: a key added is not found")
    probe_s, hits = _best(lambda: built.might_contain(absent), repeat)
    assert isinstance(hits, np.ndarray)
    held = _held(make, keys, fpp)
    return Result(name, build_s, held, len(built.bits), probe_s, float(hits.mean()))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench bloom_layouts", description=__doc__)
    ap.add_argument("--keys", type=int, default=2_500_000, help="keys in the file (2.5M)")
    ap.add_argument("--fpp", type=float, default=0.01, help="false-positive rate (0.01)")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(1)
    ids = rng.permutation(2 * args.keys)
    keys = pc.cast(pa.array(ids[: args.keys]), pa.string())
    absent = pc.cast(pa.array(ids[args.keys :]), pa.string())
    results = [
        measure("plain (baseline)", plain_builder, keys, absent, args.fpp, args.repeat),
        measure("blocked", BloomBuilder, keys, absent, args.fpp, args.repeat),
    ]
    base = results[0]
    t = table(
        f"A file's bloom filter: {args.keys:,} keys at fpp {args.fpp}, best of {args.repeat}",
        "layout", "build CPU s", "vs plain", "held while filling MiB", "vs plain",
        "stored MiB", "vs plain", "probe CPU s", "vs plain", "false positives",
    )  # fmt: skip
    for r in results:
        t.add_row(
            r.layout,
            f"{r.build_s:.3f}", f"{r.build_s / base.build_s:.2f}x",
            f"{r.held / 2**20:.1f}", f"{r.held / base.held:.2f}x",
            f"{r.stored / 2**20:.2f}", f"{r.stored / base.stored:.2f}x",
            f"{r.probe_s:.3f}", f"{r.probe_s / base.probe_s:.2f}x",
            f"{r.fpp:.4f}",
        )  # fmt: skip
    console.print(t)


if __name__ == "__main__":
    main()
