"""CRC-32 joining used by the parallel reader: same answer as one pass over all bytes."""

from __future__ import annotations

import random
import zlib

import pytest

from storage.content import checksum

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("part", [1, 7, 4096, 65_537, 1 << 20])
def test_parts_joined_in_order_equal_one_pass(part: int) -> None:
    rnd = random.Random(part)
    data = rnd.randbytes(part * 5 + rnd.randrange(part))  # whole parts and a short last one
    op = checksum.zeros_operator(part)
    crc = 0
    for start in range(0, len(data), part):
        piece = data[start : start + part]
        if len(piece) == part:
            crc = checksum.combine_with(op, crc, zlib.crc32(piece))
        else:
            crc = checksum.combine(crc, zlib.crc32(piece), len(piece))
    assert crc == zlib.crc32(data)
    assert checksum.zeros_operator(0) == [1 << n for n in range(32)]  # identity
